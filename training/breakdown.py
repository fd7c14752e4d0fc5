"""Where a step's time goes, measured: a few dedicated steps outside the measured ones, phase by phase.

Method (serialised phases). ``train.breakdown_steps`` optimizer steps are run split into phases, every phase
between two device synchronisations:

  data           fetching the step's micro-batches (``debug.data_fetch_delay_ms`` lands here)
  compute        forward and backward of every micro-batch with gradient synchronisation off (DDP's
                 ``no_sync``), so no gradient collective runs inside it: this rank's own compute (for
                 instruction data it starts with the loss scale's small all-reduce of supervised tokens)
  wait           a barrier before the collectives, so that communication is not also the wait for a slower
                 rank's compute: a fast rank's wait is the imbalance a straggler causes
  communication  the gradient collectives, issued one after another and each waited for (DDP: one
                 all-reduce per gradient bucket, DDP's bucket size, in DDP's reverse-parameter order)
  optimizer      the optimizer step (and the loss scaler's update)

Collectives a framework runs inside another phase (FSDP2's parameter all-gathers in forward and backward and
its gradient reduce-scatters in backward, ZeRO-1's parameter broadcasts in the optimizer step, Paddle
sharding's gradient reduces and parameter broadcasts in its optimizer step, tensor parallel's all-reduces,
all-gathers and reduce-scatters in forward, backward and the optimizer step) go through ``Collectives.run``: a
device synchronisation, a barrier (timed as wait), the collective waited for (timed as communication);
``measure`` moves both out of the phase they ran in. Each collective keeps the size of its own group (tensor
parallel's beside FSDP's data-parallel one), which its expected time needs.

A pipeline (``Phases.pipeline``) runs no gradient collective after its compute: its stages exchange
activations and gradients point to point inside the schedule, and a barrier there would deadlock it. Its
compute phase is split by the pipeline's own clock (training/torch/breakdown_pp.py says how): ``compute`` is
this rank's own chunk computations, each timed between synchronisations, and ``pipeline_wait`` the rest of
the schedule, the P2P transfers and the bubble (waiting for a neighbour stage) together; whatever else the
phase holds (host work outside the schedule) is left to the step's remainder.

Where they run (``in_warmup``). Where the worker's phases leave the model as they found it (no timing hook stays
installed: one process, DDP; ``FrameworkWorker.breakdown_in_warmup``) and the warm-up has ``PLAIN_WARMUP`` plain
steps before them, the breakdown steps are the last ``breakdown_steps`` warm-up steps: steps of the timed loop
like any warm-up step (each writes its step record, its loss and gradient norm), left out of every figure as
the warm-up is, and they cost the run no extra step (issue 41: 3 extra serialised steps were most of what a
2-process `accelbench run` took beyond a bare torchrun loop). Elsewhere (FSDP2, ZeRO-1, tensor parallel and
pipelines install timing on the model; a short warm-up) they run after the last measured step, as extra steps.
Either way the measured steps are untouched: they run with the framework's own overlap of communication and
backward. A breakdown step serialises what the framework overlaps, so its communication is the collectives'
whole time, an upper bound on the exposed part; the orchestrator sets it beside the measured step time.
The steps are real training steps (the model moves on). Framework-neutral: a worker hands its phases
(``Phases``) or says why it has none. PPO's learning update has phases of its own (experience making, learning:
training/torch/ppo_breakdown.py), timed the same way with ``Collectives``, one record per phase.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union

from training.contract import perflog
from training.faults import sleep_ms

AFTER, WARMUP = perflog.BREAKDOWN_AFTER, perflog.BREAKDOWN_IN_WARMUP  # where the breakdown steps run
PLAIN_WARMUP = 2  # plain warm-up steps before breakdown steps in the warm-up: the first step's one-off costs, and
#                   DDP rebuilds its buckets in gradient order at the second (the breakdown all-reduces in them)
METHOD = ("serialised phases on dedicated steps {where}: data fetch, forward+backward with "
          "gradient sync off, a barrier (wait), the gradient collectives one by one, the optimizer; each between "
          "two device synchronisations; collectives inside forward, backward or the optimizer (FSDP, ZeRO-1, "
          "tensor parallel) timed one by one after a barrier and moved into communication")

PIPELINE_METHOD = ("pipeline schedule on dedicated steps {where}: data fetch; each of this rank's "
                   "forward and backward chunks and the loss timed as compute between two synchronisations of its "
                   "stream; the rest of the schedule (P2P sends and receives issued and waited for, with the bubble) "
                   "and a barrier across the pipeline after it timed as the pipeline's waiting; the tied embedding's "
                   "gradient all-reduce after a barrier; the optimizer")


def method(where: str, pipeline: bool = False) -> str:
    """The record's ``method``: how the phases were timed, on steps ``where`` (``AFTER`` or ``WARMUP``)."""
    return (PIPELINE_METHOD if pipeline else METHOD).format(where=where)


class Collectives:
    """Times the collectives that run inside another phase, one by one (see the module docstring)."""

    def __init__(self, sync: Callable[[], None], barrier: Callable[[], None], delay_ms: Optional[float] = None):
        self.sync, self.barrier, self.delay_ms = sync, barrier, delay_ms
        self.wait_s = self.communication_s = 0.0
        self.ops: list[tuple[str, int]] = []  # (nccl-tests op name, message bytes) of each, in order
        self.ranks: list[Optional[int]] = []  # the group size of each (None: the phases' group_size)
        self.unmeasured: Optional[str] = None  # set where a collective ran that could not be timed: why

    def run(self, op: str, nbytes: int, call: Callable[[], Any], ranks: Optional[int] = None,
            barrier: Optional[Callable[[], None]] = None) -> Any:
        """``call`` (the collective, waited for) as ``op`` of ``nbytes`` (nccl-tests' message size: the
        whole buffer, the gathered or the scattered whole) over ``ranks`` ranks (None: the phases'
        ``group_size``); ``debug.collective_delay_ms`` before it. ``barrier``: one over the collective's own
        group where the ranks do not all issue the same collectives (None: ``self.barrier``)."""
        self.sync()
        began = time.perf_counter()
        (barrier or self.barrier)()
        aligned = time.perf_counter()
        sleep_ms(self.delay_ms)
        out = call()
        self.sync()
        self.wait_s += aligned - began
        self.communication_s += time.perf_counter() - aligned
        self.ops.append((op, int(nbytes)))
        self.ranks.append(ranks)
        return out

    def take(self) -> tuple[float, float]:
        """(wait, communication) seconds since the last take."""
        out = (self.wait_s, self.communication_s)
        self.wait_s = self.communication_s = 0.0
        return out


class PipelineClock(Protocol):
    """A pipeline schedule's own split of the compute phase (training/torch/breakdown_pp.py)."""

    def take(self) -> tuple[float, float]:
        """(this rank's chunk compute, the schedule's waiting: P2P and bubble) seconds since the last take."""

    def facts(self) -> dict:
        """The schedule, the stages, the micro-batches and what one step sends (the record's ``pipeline``)."""


@dataclass(frozen=True)
class Phases:
    """One rank's phases of an optimizer step, for the breakdown steps."""

    fetch: Callable[[], Any]  # -> the step's micro-batches
    compute: Callable[[Any], Any]  # loss scale, forward and backward, no gradient collective; -> the step's
    #                                StepWork where the worker makes one (a breakdown step in the warm-up is a step)
    communicate: Callable[[], list[int]]  # the gradient collectives; the bytes of each
    optimize: Callable[[], None]
    align: Callable[[], None]  # a barrier across the gradient group (nothing on one process)
    finish: Callable[[], None]  # untimed: zero the gradients
    group_size: int  # ranks each gradient collective spans
    inner: Optional[Collectives] = None  # collectives inside compute or optimize (FSDP, ZeRO-1)
    pipeline: Optional[PipelineClock] = None  # a pipeline schedule in compute: its own compute and waiting


def in_warmup(train, worker_can: bool) -> range:
    """The warm-up steps that are breakdown steps (``Timer`` in the timed loop), or none: the last
    ``train.breakdown_steps`` of the warm-up where the worker's phases leave the model as they found it
    (``worker_can``) and at least ``PLAIN_WARMUP`` plain warm-up steps come first; else the breakdown steps
    follow the measured ones (``measure``)."""
    steps, warmup = train.breakdown_steps, train.warmup_steps
    if not steps or not worker_can or warmup - steps < PLAIN_WARMUP:
        return range(0)
    return range(warmup - steps, warmup)


class Timer:
    """Runs breakdown steps one at a time (``step``) and reads them as one record (``record``)."""

    def __init__(self, rank: int, phases: Phases, sync: Callable[[], None], method: str):
        self.rank, self.phases, self.sync, self.method = rank, phases, sync, method
        self.times: dict[str, list[float]] = {name: [] for name in perflog.BreakdownRecord.PER_STEP}
        self.ops: list[tuple[str, int]] = []
        self.ranks: list[int] = []
        self.inner = phases.inner or Collectives(lambda: None, lambda: None)
        self.pipeline_wait: list[float] = []
        if phases.pipeline:
            phases.pipeline.take()

    def step(self) -> Any:
        """One breakdown step, phase by phase; what the phases' ``compute`` returned (the step's ``StepWork``
        where the worker makes one). The gradients are left for the caller to clear (``finish``, or the
        worker's ``after_step`` when the step is also one of the timed loop's)."""
        phases, inner, pipe, sync = self.phases, self.inner, self.phases.pipeline, self.sync
        inner.take()
        inner.ops, inner.ranks = [], []
        sync()
        began = time.perf_counter()
        batches = phases.fetch()
        sync()
        fetched = time.perf_counter()
        work = phases.compute(batches)
        sync()
        computed = time.perf_counter()
        wait_c, comm_c = inner.take()
        own, waited = pipe.take() if pipe else (computed - fetched - wait_c - comm_c, None)
        phases.align()
        aligned = time.perf_counter()
        buckets = phases.communicate()
        sync()
        communicated = time.perf_counter()
        phases.optimize()
        sync()
        ended = time.perf_counter()
        wait_o, comm_o = inner.take()
        self.ops = [("allreduce", int(b)) for b in buckets] + inner.ops
        self.ranks = [phases.group_size] * len(buckets) + [n or phases.group_size for n in inner.ranks]
        if waited is not None:
            self.pipeline_wait.append(waited)
        for name, value in zip(self.times, (fetched - began, own, aligned - computed + wait_c + wait_o,
                                            communicated - aligned + comm_c + comm_o,
                                            ended - communicated - wait_o - comm_o, ended - began)):
            self.times[name].append(value)
        return work

    def record(self) -> perflog.BreakdownRecord:
        phases, steps = self.phases, len(self.times["step_s"])
        if self.inner.unmeasured:  # a collective ran inside a phase untimed: its time would count as compute
            return perflog.BreakdownRecord(rank=self.rank, steps=0, method=self.method,
                                           not_measured=self.inner.unmeasured)
        return perflog.BreakdownRecord(rank=self.rank, steps=steps, bucket_bytes=[b for _, b in self.ops],
                                       collective_ops=[op for op, _ in self.ops], group_size=phases.group_size,
                                       method=self.method, pipeline_wait_s=self.pipeline_wait,
                                       pipeline=phases.pipeline.facts() if phases.pipeline else None,
                                       group_sizes=self.ranks, **self.times)


def measure(steps: int, rank: int, phases: Union[Phases, str], sync: Callable[[], None]) -> perflog.BreakdownRecord:
    """``steps`` breakdown steps after the measured ones; ``phases`` a string says why there are none (e.g. not
    measured for tensor parallel)."""
    if steps == 0 or isinstance(phases, str):
        why = "train.breakdown_steps is 0" if steps == 0 else phases
        return perflog.BreakdownRecord(rank=rank, steps=0, method=method(AFTER), not_measured=why)
    timer = Timer(rank, phases, sync, method(AFTER, pipeline=phases.pipeline is not None))
    for _ in range(steps):
        timer.step()
        phases.finish()
    return timer.record()

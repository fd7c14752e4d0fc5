"""Where a step's time goes, measured: a few dedicated steps after the measured ones, phase by phase.

Method (serialised phases). After the last measured step, ``train.breakdown_steps`` more optimizer steps are
run, each split into four phases, every phase between two device synchronisations:

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

The measured steps are untouched: they ran before, with the framework's own overlap of communication and
backward. A breakdown step serialises what the framework overlaps, so its communication is the collectives'
whole time, an upper bound on the exposed part; the orchestrator sets it beside the measured step time.
The steps are real training steps (the model moves on); their cost is ``breakdown_steps`` extra steps plus
the lost overlap. Framework-neutral: a worker hands its phases (``Phases``) or says why it has none. PPO's
learning update has phases of its own (experience making, learning: training/torch/ppo_breakdown.py), timed the
same way with ``Collectives``, one record per phase.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union

from training.contract import perflog
from training.faults import sleep_ms

METHOD = ("serialised phases on dedicated steps after the measured ones: data fetch, forward+backward with "
          "gradient sync off, a barrier (wait), the gradient collectives one by one, the optimizer; each between "
          "two device synchronisations; collectives inside forward, backward or the optimizer (FSDP, ZeRO-1, "
          "tensor parallel) timed one by one after a barrier and moved into communication")

PIPELINE_METHOD = ("pipeline schedule on dedicated steps after the measured ones: data fetch; each of this rank's "
                   "forward and backward chunks and the loss timed as compute between two synchronisations of its "
                   "stream; the rest of the schedule (P2P sends and receives issued and waited for, with the bubble) "
                   "and a barrier across the pipeline after it timed as the pipeline's waiting; the tied embedding's "
                   "gradient all-reduce after a barrier; the optimizer")


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
    compute: Callable[[Any], None]  # loss scale, forward and backward, no gradient collective
    communicate: Callable[[], list[int]]  # the gradient collectives; the bytes of each
    optimize: Callable[[], None]
    align: Callable[[], None]  # a barrier across the gradient group (nothing on one process)
    finish: Callable[[], None]  # untimed: zero the gradients
    group_size: int  # ranks each gradient collective spans
    inner: Optional[Collectives] = None  # collectives inside compute or optimize (FSDP, ZeRO-1)
    pipeline: Optional[PipelineClock] = None  # a pipeline schedule in compute: its own compute and waiting


def measure(steps: int, rank: int, phases: Union[Phases, str], sync: Callable[[], None]) -> perflog.BreakdownRecord:
    """``steps`` breakdown steps; ``phases`` a string says why there are none (e.g. not measured for
    tensor parallel)."""
    if steps == 0 or isinstance(phases, str):
        why = "train.breakdown_steps is 0" if steps == 0 else phases
        return perflog.BreakdownRecord(rank=rank, steps=0, method=METHOD, not_measured=why)
    times: dict[str, list[float]] = {name: [] for name in ("data_s", "compute_s", "wait_s", "communication_s",
                                                            "optimizer_s", "step_s")}
    buckets: list[int] = []
    ops: list[tuple[str, int]] = []
    ranks: list[int] = []
    inner = phases.inner or Collectives(lambda: None, lambda: None)
    pipe, pipeline_wait = phases.pipeline, []
    if pipe:
        pipe.take()
    for _ in range(steps):
        inner.take()
        inner.ops, inner.ranks = [], []
        sync()
        began = time.perf_counter()
        batches = phases.fetch()
        sync()
        fetched = time.perf_counter()
        phases.compute(batches)
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
        ops = [("allreduce", int(b)) for b in buckets] + inner.ops
        ranks = [phases.group_size] * len(buckets) + [n or phases.group_size for n in inner.ranks]
        phases.finish()
        if waited is not None:
            pipeline_wait.append(waited)
        for name, value in zip(times, (fetched - began, own,
                                       aligned - computed + wait_c + wait_o,
                                       communicated - aligned + comm_c + comm_o,
                                       ended - communicated - wait_o - comm_o, ended - began)):
            times[name].append(value)
    if inner.unmeasured:  # a collective ran inside a phase untimed: its time would count as compute
        return perflog.BreakdownRecord(rank=rank, steps=0, method=METHOD, not_measured=inner.unmeasured)
    return perflog.BreakdownRecord(rank=rank, steps=steps, bucket_bytes=[b for _, b in ops],
                                   collective_ops=[op for op, _ in ops], group_size=phases.group_size,
                                   method=PIPELINE_METHOD if pipe else METHOD, pipeline_wait_s=pipeline_wait,
                                   pipeline=pipe.facts() if pipe else None, group_sizes=ranks, **times)

"""Where a step's time goes, measured: a few dedicated steps after the measured ones, phase by phase.

Method (serialised phases). After the last measured step, ``train.breakdown_steps`` more optimizer steps are
run, each split into four phases, every phase between two device synchronisations:

  data           fetching the step's micro-batches (``debug.data_fetch_delay_ms`` lands here)
  compute        forward and backward of every micro-batch with gradient synchronisation off (DDP's
                 ``no_sync``), so no collective runs inside it: this rank's own compute
  wait           a barrier before the collectives, so that communication is not also the wait for a slower
                 rank's compute: a fast rank's wait is the imbalance a straggler causes
  communication  the gradient collectives, issued one after another and each waited for (DDP: one
                 all-reduce per gradient bucket, DDP's bucket size, in DDP's reverse-parameter order)
  optimizer      the optimizer step (and the loss scaler's update)

The measured steps are untouched: they ran before, with the framework's own overlap of communication and
backward. A breakdown step serialises what the framework overlaps, so its communication is the collectives'
whole time, an upper bound on the exposed part; the orchestrator sets it beside the measured step time.
The steps are real training steps (the model moves on); their cost is ``breakdown_steps`` extra steps plus
the lost overlap. Framework-neutral: a worker hands its phases (``Phases``) or says why it has none.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Union

from training.contract import perflog

METHOD = ("serialised phases on dedicated steps after the measured ones: data fetch, forward+backward with "
          "gradient sync off, a barrier (wait), the gradient collectives one by one, the optimizer; each between "
          "two device synchronisations")


@dataclass(frozen=True)
class Phases:
    """One rank's phases of an optimizer step, for the breakdown steps."""

    fetch: Callable[[], Any]  # -> the step's micro-batches
    compute: Callable[[Any], None]  # forward and backward over them, no collective
    communicate: Callable[[], list[int]]  # the gradient collectives; the bytes of each
    optimize: Callable[[], None]
    align: Callable[[], None]  # a barrier across the gradient group (nothing on one process)
    finish: Callable[[], None]  # untimed: zero the gradients
    group_size: int  # ranks each gradient collective spans


def measure(steps: int, rank: int, phases: Union[Phases, str], sync: Callable[[], None]) -> perflog.BreakdownRecord:
    """``steps`` breakdown steps; ``phases`` a string says why there are none (e.g. not measured for
    tensor parallel)."""
    if steps == 0 or isinstance(phases, str):
        why = "train.breakdown_steps is 0" if steps == 0 else phases
        return perflog.BreakdownRecord(rank=rank, steps=0, method=METHOD, not_measured=why)
    times: dict[str, list[float]] = {name: [] for name in ("data_s", "compute_s", "wait_s", "communication_s",
                                                            "optimizer_s", "step_s")}
    buckets: list[int] = []
    for _ in range(steps):
        sync()
        began = time.perf_counter()
        batches = phases.fetch()
        sync()
        fetched = time.perf_counter()
        phases.compute(batches)
        sync()
        computed = time.perf_counter()
        phases.align()
        aligned = time.perf_counter()
        buckets = phases.communicate()
        sync()
        communicated = time.perf_counter()
        phases.optimize()
        sync()
        ended = time.perf_counter()
        phases.finish()
        for name, value in zip(times, (fetched - began, computed - fetched, aligned - computed,
                                       communicated - aligned,
                                       ended - communicated, ended - began)):
            times[name].append(value)
    return perflog.BreakdownRecord(rank=rank, steps=steps, bucket_bytes=[int(b) for b in buckets],
                                   group_size=phases.group_size, method=METHOD, **times)

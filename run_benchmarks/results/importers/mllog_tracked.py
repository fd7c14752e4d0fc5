"""An MLPerf log's ``tracked_stats``: the submitter's own measurements, kept beside the figures the rules define.

MLPerf's rules do not define ``tracked_stats``: its ``throughput`` is the total in one submission and per
device in the next (RetinaNet, rounds 4.1 and 5.0), so it never becomes the headline. It is kept as "samples/s
as logged" only where it agrees with the blocks' samples/s (within ``AGREE``); where it does not, a warning
names both and the ratio, and it is not stored. Its ``train_step_time`` (a step's time), ``reduced_train_loss``
and ``max_memory_usage`` (GiB: the log names no unit) are read where the blocks measured.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from run_benchmarks.results.figures.analyze import Stats
from run_benchmarks.results.importers import Imported, higher, number
from run_benchmarks.results.importers.mllog_events import Event

GIB = 2**30
AGREE = 0.10  # the blocks' samples/s and tracked_stats' own: past this the log's own is not kept


@dataclass
class Tracked:
    throughput: list[tuple[int, float]] = field(default_factory=list)  # (interval, samples/s)
    steps: list[tuple[int, float]] = field(default_factory=list)  # (interval, seconds)
    loss: list[float] = field(default_factory=list)
    memory: Optional[float] = None

    @classmethod
    def of(cls, events: Sequence[Event], starts: Sequence[int]) -> "Tracked":
        """``starts``: the file index of each measured interval's start; an event belongs to the last one before it."""
        out = cls()
        for event in events:
            if event.key != "tracked_stats" or not isinstance(event.value, dict):
                continue
            where = bisect_right(starts, event.index) - 1
            rate, step = number(event.value.get("throughput")), number(event.value.get("train_step_time"))
            if rate is not None:
                out.throughput.append((where, rate))
            elif step is not None:  # a step's own time (a block's mean comes with its throughput)
                out.steps.append((where, step))
            loss = number(event.value.get("reduced_train_loss"))
            if loss is not None:
                out.loss.append(loss)
            memory = number(event.value.get("max_memory_usage"))
            if memory is not None:
                out.memory = higher(out.memory, memory)
        return out

    def figures(self, result: Imported, first: int, rate: Optional[float], warnings: list[str]) -> None:
        """The log's own throughput beside ``rate`` (the blocks'), step time, loss and memory, each with its source;
        ``first``: the first measured interval (the ones before are warm-up)."""
        m = result.metrics
        own = [r for i, r in self.throughput if i >= first] or [r for _, r in self.throughput]
        if own:
            mean = math.fsum(own) / len(own)
            if rate is not None and rate > 0 and abs(mean / rate - 1) <= AGREE:
                m["samples_per_s_logged"] = mean
                result.source("samples_per_s_logged", f"log: tracked_stats throughput, mean of {len(own)}")
            elif rate is not None and rate > 0:
                warnings.append(f"tracked_stats throughput {mean:,.4g} is not the blocks' {rate:,.4g} samples/s "
                                f"(x{rate / mean:,.3g}): MLPerf's rules do not say whether it is per device or the "
                                "total, so it is not kept")
            else:
                warnings.append(f"tracked_stats throughput {mean:,.4g} is the log's own figure and the blocks give "
                                "none to check it against (per device or total?): not kept")
        steps = [t for i, t in self.steps if i >= first]
        if steps:
            m["step_time_s"] = asdict(Stats.of(steps))
            result.source("step_time_s", f"log: tracked_stats train_step_time, {len(steps)} step(s) in the measured "
                                         "blocks")
        if self.loss:
            m["loss_first"], m["loss_last"] = self.loss[0], self.loss[-1]
            result.source("loss_last", "log: tracked_stats reduced_train_loss, the last")
        if self.memory is not None:
            m["peak_memory_bytes"], m["memory_kind"] = {"max": self.memory * GIB}, "max_memory_usage"
            result.source("peak_memory_bytes", "log: tracked_stats max_memory_usage, the largest (read as GiB: the "
                                               "log names no unit)")

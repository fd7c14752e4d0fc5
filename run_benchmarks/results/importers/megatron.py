"""Megatron-LM training logs (version 1): the lines ``training_log`` prints every ``--log-interval`` iterations,

     [2024-05-01 12:00:00] iteration      100/    1000 | consumed samples:        51200 | elapsed time per
     iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 150.2 | learning rate: 1.500000E-04 |
     global batch size:   512 | lm loss: 2.345000E+00 | loss scale: 1.0 | grad norm: 0.912 | ...

(one line each), and the memory report after the first interval,

    [Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.5 | max allocated: 2345.6 | reserved: 3000.0
    | max reserved: 3100.0

Each iteration line is the mean over the iterations since the previous line (their number is the
difference of the two iteration counts). Over the intervals after the first ``skip_intervals``
(warm-up): samples/s = sum(global batch x iterations) / sum(time per iteration x iterations), so a
batch ramp-up or unequal intervals weigh right; step time statistics are over those intervals' means.
Megatron's own TFLOP/s per GPU counts FLOPs its own way and is kept as ``tflops_per_device_logged``.
Memory is MB as Megatron prints it (bytes / 2**20); the allocator's allocated and reserved peaks are
kept apart (``peak_memory_bytes``, ``peak_memory_reserved_bytes``), the largest over every rank reported.

The lines are read as a stream and folded as they come (a few numbers per interval are kept), every pattern
matches in time linear in the line's length, and an iteration count longer than 18 digits is no count.
"""
from __future__ import annotations

import math
import re
from array import array
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from run_benchmarks.results.analyze import Stats
from run_benchmarks.results.importers import (Imported, Span, clip, higher, line_log_result, read_lines, register, whole)

# Each pattern below is unambiguous (no two quantifiers can trade characters), so a 1 MiB line costs linear time.
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)")
_STAMP = re.compile(r"^\s*\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\]")
_MEMORY = re.compile(r"\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\)(.*)")
MIB = 1 << 20
TIME = "elapsed time per iteration (ms)"
TFLOPS = "throughput per GPU (TFLOP/s/GPU)"
BATCH = "global batch size"


def _fields(text: str) -> dict[str, float]:
    """``key: number`` of each ``|``-separated field (the number after a field's last colon)."""
    out = {}
    for piece in text.split("|"):
        before, colon, value = piece.rpartition(":")
        key, value = before.rsplit(":", 1)[-1].strip(), value.strip()
        if colon and key and _NUMBER.fullmatch(value):
            out[key] = float(value)
    return out


class _Measured:
    """The intervals after the warm-up ones, folded: per interval its time, iterations, batch and TFLOP/s terms."""

    def __init__(self) -> None:
        self.step_times, self.seconds, self.samples, self.tflops = array("d"), array("d"), array("d"), array("d")
        self.iterations, self.all_batch, self.all_tflops = 0, True, True
        self.last_batch: Optional[float] = None

    def add(self, fields: dict, iterations: int) -> None:
        self.step_times.append(fields[TIME] / 1000)
        self.seconds.append(fields[TIME] / 1000 * iterations)
        self.iterations += iterations
        if BATCH in fields and self.all_batch:
            self.samples.append(fields[BATCH] * iterations)
            self.last_batch = fields[BATCH]
        else:
            self.all_batch = False
        if TFLOPS in fields and self.all_tflops:
            self.tflops.append(fields[TFLOPS] * iterations)
        else:
            self.all_tflops = False


@register("megatron", 1, "Megatron-LM iteration lines (elapsed time per iteration, TFLOP/s/GPU, memory (MB))")
def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, error, previous, intervals, measured = Span(), None, 0, 0, _Measured()
    loss_first = loss_last = allocated = reserved = None
    for line in read_lines(path, notes):
        stamp = _STAMP.match(line)
        if stamp:
            span.see(stamp.group(1))
        iteration, mem = _ITERATION.search(line), _MEMORY.search(line)
        if iteration and len(iteration.group(1)) <= 18:
            fields = _fields(iteration.group(3))
            done = int(iteration.group(1))
            if TIME in fields:
                intervals += 1
                if intervals > skip_intervals:
                    measured.add(fields, max(done - previous, 1))
                if "lm loss" in fields:
                    loss_first = fields["lm loss"] if loss_first is None else loss_first
                    loss_last = fields["lm loss"]
            previous = done
        elif mem:
            fields = _fields(mem.group(3))
            if "max allocated" in fields:
                allocated = higher(allocated, fields["max allocated"])
            if "max reserved" in fields:
                reserved = higher(reserved, fields["max reserved"])
        elif line.startswith("Traceback (most recent call last)"):
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" "):
            error = clip(line.strip(), 300)  # the exception line that ends the traceback
    result = line_log_result(world_size, intervals, skip_intervals, span, error)
    result.warnings.extend(notes)
    m = result.metrics
    over = f"{len(measured.step_times)} interval(s) after the first {skip_intervals}"
    if measured.step_times:
        seconds = math.fsum(measured.seconds)
        m["step_time_s"] = asdict(Stats.of(measured.step_times))
        result.source("step_time_s", f"log: {TIME} / 1000, {over}")
        if measured.all_batch:
            if seconds:  # 0 s: the step time says it (figure_checks)
                m["samples_per_s"] = math.fsum(measured.samples) / seconds
                result.source("samples_per_s", f"derived from the log: sum(global batch size x iterations) / "
                                               f"sum(time per iteration x iterations), {over}")
            m["samples_per_step"] = whole(measured.last_batch)
            result.source("samples_per_step", "log: global batch size, the last")
        if measured.all_tflops:
            m["tflops_per_device_logged"] = math.fsum(measured.tflops) / measured.iterations
            result.source("tflops_per_device_logged", f"log: {TFLOPS} (Megatron's own FLOP count), weighted by "
                                                      f"iterations, {over}")
    elif not error:
        result.warnings.append(f"{intervals} iteration line(s), none after the {skip_intervals} warm-up "
                               "interval(s): no step time or throughput")
    if loss_first is not None:
        m["loss_first"], m["loss_last"] = loss_first, loss_last
        result.source("loss_last", "log: lm loss of the last iteration line")
    if allocated is not None:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": allocated * MIB}, "allocated"
        result.source("peak_memory_bytes", "log: max allocated (MB), the largest over the ranks reported")
    if reserved is not None:
        m["peak_memory_reserved_bytes"] = {"max": reserved * MIB}
        result.source("peak_memory_reserved_bytes", "log: max reserved (MB), the largest over the ranks reported")
    return result

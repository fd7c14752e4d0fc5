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
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from ..analyze import Stats
from . import Imported, line_log_result, read_lines, register

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
_FIELD = re.compile(r"\s*([^|:]+?)\s*:\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))\s*(?=\||$)")
_STAMP = re.compile(r"^\s*\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\]")
_MEMORY = re.compile(r"\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\)(.*)")
MIB = 1 << 20
TIME = "elapsed time per iteration (ms)"
TFLOPS = "throughput per GPU (TFLOP/s/GPU)"
BATCH = "global batch size"


def _fields(text: str) -> dict[str, float]:
    return {k.strip(): float(v) for k, v in _FIELD.findall(text)}


@register("megatron", 1, "Megatron-LM iteration lines (elapsed time per iteration, TFLOP/s/GPU, memory (MB))")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    intervals, memory, stamps, error, previous = [], [], [], None, 0
    for line in read_lines(path):
        stamp = _STAMP.match(line)
        if stamp:
            stamps.append(datetime.fromisoformat(stamp.group(1)))
        iteration, mem = _ITERATION.search(line), _MEMORY.search(line)
        if iteration:
            fields = _fields(iteration.group(3))
            done = int(iteration.group(1))
            if TIME in fields:
                intervals.append({**fields, "iterations": max(done - previous, 1), "iteration": done})
            previous = done
        elif mem:
            memory.append(_fields(mem.group(3)))
        elif line.startswith("Traceback (most recent call last)"):
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" "):
            error = line.strip()  # the exception line that ends the traceback
    result = line_log_result(world_size, len(intervals), skip_intervals, stamps, error)
    m = result.metrics
    measured = intervals[skip_intervals:]
    if measured:
        iterations = [i["iterations"] for i in measured]
        seconds = math.fsum(i[TIME] / 1000 * n for i, n in zip(measured, iterations))
        m["step_time_s"] = asdict(Stats.of([i[TIME] / 1000 for i in measured]))
        if all(BATCH in i for i in measured):
            m["samples_per_s"] = math.fsum(i[BATCH] * n for i, n in zip(measured, iterations)) / seconds
            m["samples_per_step"] = int(measured[-1][BATCH])
        if all(TFLOPS in i for i in measured):
            m["tflops_per_device_logged"] = math.fsum(i[TFLOPS] * n for i, n in zip(measured, iterations)) / sum(
                iterations)
    elif not error:
        result.warnings.append(f"{len(intervals)} iteration line(s), none after the {skip_intervals} warm-up "
                               "interval(s): no step time or throughput")
    losses = [i["lm loss"] for i in intervals if "lm loss" in i]
    if losses:
        m["loss_first"], m["loss_last"] = losses[0], losses[-1]
    allocated = [r["max allocated"] for r in memory if "max allocated" in r]
    if allocated:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": max(allocated) * MIB}, "allocated"
    reserved = [r["max reserved"] for r in memory if "max reserved" in r]
    if reserved:
        m["peak_memory_reserved_bytes"] = {"max": max(reserved) * MIB}
    return result

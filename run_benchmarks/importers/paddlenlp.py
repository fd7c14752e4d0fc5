"""PaddleNLP trainer logs (version 1): the interval lines its Trainer prints every logging step,

    [2024-05-01 10:00:00,000] [    INFO] - loss: 7.1, learning_rate: 3e-05, global_step: 20,
    current_memory_allocated: 20.5, current_memory_reserved: 30.1, max_memory_allocated: 25.3,
    max_memory_reserved: 31.0, interval_runtime: 12.3, interval_samples_per_second: 2.6,
    interval_tokens_per_second_per_device: 2660.1, interval_steps_per_second: 0.08, ...

Memory fields are GiB (the trainer divides the allocator's bytes by 1024**3); both peaks are kept,
named: ``max_memory_allocated`` as ``peak_memory_bytes`` (memory_kind allocated) and
``max_memory_reserved`` as ``peak_memory_reserved_bytes``. The first
``skip_intervals`` intervals are warm-up (compilation, allocator growth) and excluded, as
accelbench excludes its own warm-up steps.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path

from . import Imported, read_lines, register

_PAIR = re.compile(r"(\w+): ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
GIB = 1 << 30


@register("paddlenlp", 1, "PaddleNLP Trainer interval lines (interval_tokens_per_second_per_device, memory in GiB)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    intervals, stamps, error = [], [], None
    for line in read_lines(path):
        stamp = _STAMP.match(line)
        if stamp:
            stamps.append(stamp.group(1))
        if "interval_tokens_per_second_per_device" in line or "interval_samples_per_second" in line:
            intervals.append({k: float(v) for k, v in _PAIR.findall(line)})
        elif line.startswith("Traceback (most recent call last)"):
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" "):
            error = line.strip()  # the exception line that ends the traceback
    measured = intervals[skip_intervals:]
    result = Imported(status="ok", metrics={}, details={"intervals": len(intervals), "skipped": skip_intervals})
    if stamps:
        result.started_at, result.ended_at = (datetime.fromisoformat(s).isoformat() for s in (stamps[0], stamps[-1]))
        result.wall_time_s = (datetime.fromisoformat(stamps[-1]) - datetime.fromisoformat(stamps[0])).total_seconds()
    if error:
        result.status, result.reason = "failed", f"the log ends in an error: {error}"
    if not measured:
        result.status = "failed"
        result.reason = result.reason or (f"{len(intervals)} interval line(s), none after the {skip_intervals} "
                                          "warm-up interval(s)")
        return result
    m = result.metrics

    def mean(key: str):
        values = [i[key] for i in measured if key in i and math.isfinite(i[key])]
        return math.fsum(values) / len(values) if values else None

    m["tokens_per_s_per_device"] = mean("interval_tokens_per_second_per_device")
    if m["tokens_per_s_per_device"] is not None:
        m["tokens_per_s_total"] = m["tokens_per_s_per_device"] * world_size
    m["samples_per_s"] = mean("interval_samples_per_second")
    steps_per_s = mean("interval_steps_per_second")
    if steps_per_s:
        m["step_time_s"] = {"median": 1 / steps_per_s}
    peaks = [i["max_memory_allocated"] for i in intervals if "max_memory_allocated" in i]
    if peaks:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": max(peaks) * GIB}, "allocated"
    reserved = [i["max_memory_reserved"] for i in intervals if "max_memory_reserved" in i]
    if reserved:  # what the device had to hold (the allocator's cache too): often far above the allocated peak
        m["peak_memory_reserved_bytes"] = {"max": max(reserved) * GIB}
    losses = [i["loss"] for i in intervals if "loss" in i]
    if losses:
        m["loss_first"], m["loss_last"] = losses[0], losses[-1]
    m["world_size"] = world_size
    return result

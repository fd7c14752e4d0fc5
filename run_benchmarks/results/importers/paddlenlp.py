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

The lines are read as a stream and folded as they come (a sum and a count per figure are kept); the pattern
matches in time linear in the line's length. A nan, infinite or negative value stays in its mean for the
figure checks to name (``figure_checks``: the import is then failed), never left out unseen.
"""
from __future__ import annotations

import math
import re
from array import array
from pathlib import Path

from run_benchmarks.results.importers import Imported, Span, clip, higher, line_log_result, read_lines, register

# A key starts at a word's start only ((?<!\w)), so a long run of word characters is scanned once, not once
# per character; the number is unambiguous: a 1 MiB line costs linear time.
_PAIR = re.compile(r"(?<!\w)(\w+): ([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
GIB = 1 << 30
MEANS = ("interval_tokens_per_second_per_device", "interval_samples_per_second", "interval_steps_per_second")


@register("paddlenlp", 1, "PaddleNLP Trainer interval lines (interval_tokens_per_second_per_device, memory in GiB)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, error, count = Span(), None, 0
    sums = {key: array("d") for key in MEANS}  # over the measured intervals, summed exactly at the end
    allocated = reserved = loss_first = loss_last = None
    for line in read_lines(path, notes):
        stamp = _STAMP.match(line)
        if stamp:
            span.see(stamp.group(1))
        if "interval_tokens_per_second_per_device" in line or "interval_samples_per_second" in line:
            interval = {k: float(v) for k, v in _PAIR.findall(line)}
            count += 1
            if count > skip_intervals:
                for key in MEANS:
                    if key in interval:
                        sums[key].append(interval[key])
            if "max_memory_allocated" in interval:
                allocated = higher(allocated, interval["max_memory_allocated"])
            if "max_memory_reserved" in interval:
                reserved = higher(reserved, interval["max_memory_reserved"])
            if "loss" in interval:
                loss_first = interval["loss"] if loss_first is None else loss_first
                loss_last = interval["loss"]
        elif line.startswith("Traceback (most recent call last)"):
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" "):
            error = clip(line.strip(), 300)  # the exception line that ends the traceback
    result = line_log_result(world_size, count, skip_intervals, span, error)
    result.warnings.extend(notes)
    if count <= skip_intervals:
        result.status = "failed"
        result.reason = result.reason or (f"{count} interval line(s), none after the {skip_intervals} "
                                          "warm-up interval(s)")
        return result
    m = result.metrics
    tokens, samples, steps_per_s = (math.fsum(sums[k]) / len(sums[k]) if sums[k] else None for k in MEANS)
    m["tokens_per_s_per_device"] = tokens
    if tokens is not None:
        m["tokens_per_s_total"] = tokens * world_size
    m["samples_per_s"] = samples
    if steps_per_s:
        m["step_time_s"] = {"median": 1 / steps_per_s}
    if allocated is not None:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": allocated * GIB}, "allocated"
    if reserved is not None:  # what the device had to hold (the allocator's cache too): often far above allocated
        m["peak_memory_reserved_bytes"] = {"max": reserved * GIB}
    if loss_first is not None:
        m["loss_first"], m["loss_last"] = loss_first, loss_last
    return result

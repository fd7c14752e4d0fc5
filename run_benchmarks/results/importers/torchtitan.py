"""torchtitan training logs (version 1): the metric line its MetricsProcessor logs every ``log_freq`` steps,

    [rank0]:[titan] 2025-01-10 12:00:00,000 - root - INFO - step: 10  loss:  7.8125  memory: 32.21GiB(40.62%)
    tps: 1,234  tflops: 56.78  mfu: 18.23%

(one line; a terminal run colours each field with ANSI codes, stripped here; newer versions add
``grad_norm``). ``tps`` is tokens per second per device, ``memory`` the device's peak *reserved*
memory in GiB (bytes / 2**30) with its share of the device, ``tflops`` and ``mfu`` torchtitan's own
FLOP count (kept as ``*_logged``). torchtitan logs step 1 alone and then every ``log_freq`` steps,
so a line covers the steps since the previous one: over the lines after the first
``skip_intervals`` (warm-up), tokens/s/device = sum(steps) / sum(steps / tps), the time-weighted
mean for a constant batch (likewise for the logged TFLOP/s and MFU).

The lines are read as a stream and folded as they come (two sums per figure are kept); every pattern matches
in time linear in the line's length, and a step count longer than 18 digits is no count. A nan, infinite or
negative rate stays in the mean for the figure checks to name, never left out unseen; a rate missing or 0 on
any measured line leaves that figure out (as torchtitan's 0 TFLOP/s where it counts no FLOPs).
"""
from __future__ import annotations

import math
import re
from array import array
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import Imported, Span, clip, higher, line_log_result, read_lines, register

# Unambiguous patterns (no two quantifiers can trade characters): a 1 MiB line costs linear time.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = r"([-+]?(?:[\d,]+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))"
_STEP = re.compile(r"\bstep:\s*(\d+)\s")
_FIELDS = {
    "loss": re.compile(r"\bloss:\s*" + _NUMBER),
    "memory": re.compile(r"\bmemory:\s*" + _NUMBER + r"\s*GiB"),
    "tps": re.compile(r"\btps:\s*" + _NUMBER),
    "tflops": re.compile(r"\btflops:\s*" + _NUMBER),
    "mfu": re.compile(r"\bmfu:\s*" + _NUMBER + "%"),
}
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
GIB = 1 << 30
RATES = ("tps", "tflops", "mfu")


def _value(text: str) -> Optional[float]:
    digits = text.replace(",", "")
    return float(digits) if digits.strip("+-") else None  # "," alone is no number


class _Weighted:
    """sum(steps) / sum(steps / value) of each rate over the measured lines: a per-second rate averaged over
    time, not over lines. A rate missing or 0 on any line has no mean."""

    def __init__(self) -> None:
        self.steps = 0
        self.time = {key: array("d") for key in RATES}  # per line steps / value, summed exactly at the end
        self.missing: set[str] = set()

    def add(self, values: dict, steps: int) -> None:
        self.steps += steps
        for key in RATES:
            if not values.get(key) or key in self.missing:
                self.missing.add(key)
                self.time[key] = array("d")
            else:
                self.time[key].append(steps / values[key])

    def mean(self, key: str) -> Optional[float]:
        if key in self.missing or not self.time[key]:
            return None
        total = math.fsum(self.time[key])
        return self.steps / total if total else math.inf


@register("torchtitan", 1, "torchtitan metric lines (step, loss, memory GiB reserved, tps, tflops, mfu)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, error, previous, count, weighted = Span(), None, 0, 0, _Weighted()
    loss_first = loss_last = reserved = None
    for raw in read_lines(path, notes):
        line = _ANSI.sub("", raw)
        step = _STEP.search(line)
        if step and "tps:" in line and len(step.group(1)) <= 18:
            values = {k: v for k, r in _FIELDS.items()
                      if (m := r.search(line)) and (v := _value(m.group(1))) is not None}
            done = int(step.group(1))
            count += 1
            if count > skip_intervals:
                weighted.add(values, max(done - previous, 1))
            previous = done
            if "loss" in values:
                loss_first = values["loss"] if loss_first is None else loss_first
                loss_last = values["loss"]
            if "memory" in values:
                reserved = higher(reserved, values["memory"])
            stamp = _STAMP.search(line)
            if stamp:
                span.see(stamp.group(1))
        elif "Traceback (most recent call last)" in line:
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" ") and "Error" in line:
            error = clip(line.strip(), 300)
    result = line_log_result(world_size, count, skip_intervals, span, error)
    result.warnings.extend(notes)
    m = result.metrics
    if weighted.steps:
        tps, tflops, mfu = (weighted.mean(key) for key in RATES)
        if tps is not None:
            m["tokens_per_s_per_device"] = tps
        if tflops is not None:
            m["tflops_per_device_logged"] = tflops
        if mfu is not None:
            m["mfu_logged"] = mfu / 100
    elif count:
        result.warnings.append(f"{count} metric line(s), none after the {skip_intervals} warm-up one(s)")
    if loss_first is not None:
        m["loss_first"], m["loss_last"] = loss_first, loss_last
    if reserved is not None:
        m["peak_memory_reserved_bytes"] = {"max": reserved * GIB}
    return result

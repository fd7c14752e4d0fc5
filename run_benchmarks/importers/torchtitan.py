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
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path

from . import Imported, line_log_result, read_lines, register

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = r"([-+]?(?:[\d,]+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
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


def _weighted(lines: list[dict], key: str):
    """sum(steps) / sum(steps / value): a per-second rate averaged over time, not over lines."""
    if not all(line.get(key) for line in lines):
        return None
    return sum(line["steps"] for line in lines) / math.fsum(line["steps"] / line[key] for line in lines)


@register("torchtitan", 1, "torchtitan metric lines (step, loss, memory GiB reserved, tps, tflops, mfu)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    lines, stamps, error, previous = [], [], None, 0
    for raw in read_lines(path):
        line = _ANSI.sub("", raw)
        step = _STEP.search(line)
        if step and "tps:" in line:
            values = {k: float(m.group(1).replace(",", "")) for k, r in _FIELDS.items() if (m := r.search(line))}
            done = int(step.group(1))
            lines.append({**values, "step": done, "steps": max(done - previous, 1)})
            previous = done
            stamp = _STAMP.search(line)
            if stamp:
                stamps.append(datetime.fromisoformat(stamp.group(1)))
        elif "Traceback (most recent call last)" in line:
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" ") and "Error" in line:
            error = line.strip()
    result = line_log_result(world_size, len(lines), skip_intervals, stamps, error)
    m = result.metrics
    measured = lines[skip_intervals:]
    if measured:
        m["tokens_per_s_per_device"] = _weighted(measured, "tps")
        if m["tokens_per_s_per_device"] is None:
            del m["tokens_per_s_per_device"]
        tflops, mfu = _weighted(measured, "tflops"), _weighted(measured, "mfu")
        if tflops is not None:
            m["tflops_per_device_logged"] = tflops
        if mfu is not None:
            m["mfu_logged"] = mfu / 100
    elif lines:
        result.warnings.append(f"{len(lines)} metric line(s), none after the {skip_intervals} warm-up one(s)")
    losses = [line["loss"] for line in lines if "loss" in line]
    if losses:
        m["loss_first"], m["loss_last"] = losses[0], losses[-1]
    reserved = [line["memory"] for line in lines if "memory" in line]
    if reserved:
        m["peak_memory_reserved_bytes"] = {"max": max(reserved) * GIB}
    return result

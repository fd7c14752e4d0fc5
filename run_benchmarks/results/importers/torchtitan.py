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

Several ranks may log (``LOG_RANK=0,1,2,3``): torchrun prefixes each line with ``[rankN]:`` and the ranks'
lines interleave, or, unprefixed, each step's line comes once per rank. One rank's lines are kept, rank 0's
or the lowest present (each rank is folded apart, the others dropped at the end), and of unprefixed lines
the first for each step (a line whose step is not past the last kept one is another rank's). Warm-up is
the first ``skip_intervals`` logged steps of that rank. ``validate step: ...`` lines (the validator's loss
and tps over the validation set) are not training throughput and are left out, counted. A ``memory:
0.00GiB`` is no reading (torchtitan prints it where it reads no device memory), never a 0-byte peak.

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
_VALIDATION = re.compile(r"\bvalidat\w*\s+step:", re.IGNORECASE)
_RANK = re.compile(r"^\s*\[rank(\d{1,6})\]:")
MAX_RANKS = 1024  # ranks folded apart; lines of further ranks are left out (a log of 10^6 ranks is no log)
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


class _Rank:
    """One rank's metric lines, folded: warm-up skipped by logged step, rates time-weighted, loss, memory."""

    def __init__(self) -> None:
        self.count, self.previous, self.repeats, self.zero_memory = 0, 0, 0, 0
        self.weighted = _Weighted()
        self.loss_first = self.loss_last = self.reserved = None

    def add(self, done: int, values: dict, skip: int) -> None:
        if self.count and done <= self.previous:
            self.repeats += 1  # the same step again: another rank's line, unprefixed
            return
        self.count += 1
        if self.count > skip:
            self.weighted.add(values, done - self.previous if self.count > 1 else max(done, 1))
        self.previous = done
        if "loss" in values:
            self.loss_first = values["loss"] if self.loss_first is None else self.loss_first
            self.loss_last = values["loss"]
        if values.get("memory") == 0:
            self.zero_memory += 1
        elif "memory" in values:
            self.reserved = higher(self.reserved, values["memory"])


@register("torchtitan", 1, "torchtitan metric lines (step, loss, memory GiB reserved, tps, tflops, mfu)")
def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, error, ranks, validation, extra_ranks = Span(), None, {}, 0, 0
    for raw in read_lines(path, notes):
        line = _ANSI.sub("", raw)
        step = _STEP.search(line)
        if step and "tps:" in line and len(step.group(1)) <= 18:
            if _VALIDATION.search(line):
                validation += 1
                continue
            prefix = _RANK.match(line)
            rank = int(prefix.group(1)) if prefix else -1  # -1: no prefix
            if rank not in ranks and len(ranks) >= MAX_RANKS:
                extra_ranks += 1
                continue
            values = {k: v for k, r in _FIELDS.items()
                      if (m := r.search(line)) and (v := _value(m.group(1))) is not None}
            ranks.setdefault(rank, _Rank()).add(int(step.group(1)), values, skip_intervals)
            stamp = _STAMP.search(line)
            if stamp:
                span.see(stamp.group(1))
        elif "Traceback (most recent call last)" in line:
            error = "a traceback"
        elif error and line.strip() and not line.startswith(" ") and "Error" in line:
            error = clip(line.strip(), 300)
    prefixed = sorted(r for r in ranks if r >= 0)
    kept = prefixed[0] if prefixed else -1
    one = ranks.get(kept) or _Rank()
    result = line_log_result(world_size, one.count, skip_intervals, span, error)
    result.warnings.extend(notes)
    result.details.update(rank=None if kept < 0 else kept, ranks_logging=len(prefixed) or None,
                          validation_lines=validation, repeated_lines=one.repeats)
    if len(prefixed) > 1:
        result.warnings.append(f"{len(prefixed)} ranks log metric lines (ranks {prefixed[0]}-{prefixed[-1]}): "
                               f"rank {kept}'s kept, the others' left out")
    if one.repeats:
        result.warnings.append(f"{one.repeats:,} metric line(s) repeat a step already logged (each rank logging "
                               "without a [rankN]: prefix): one line per step kept")
    if validation:
        result.warnings.append(f"{validation:,} validation line(s) (validate step) left out: not training throughput")
    if extra_ranks:
        result.warnings.append(f"{extra_ranks:,} line(s) of ranks past the first {MAX_RANKS} left out")
    m = result.metrics
    weighted = one.weighted
    if weighted.steps:
        tps, tflops, mfu = (weighted.mean(key) for key in RATES)
        lines = f"{one.count - skip_intervals} line(s) after the first {skip_intervals} logged step(s)"
        for key, value, text in (("tokens_per_s_per_device", tps, "tps (tokens/s per device)"),
                                 ("tflops_per_device_logged", tflops, "tflops (torchtitan's own FLOP count)"),
                                 ("mfu_logged", None if mfu is None else mfu / 100, "mfu (torchtitan's own)")):
            if value is not None:
                m[key] = value
                result.source(key, f"log: {text}, time-weighted over {lines}")
    elif one.count:
        result.warnings.append(f"{one.count} metric line(s), none after the {skip_intervals} warm-up one(s)")
    if one.loss_first is not None:
        m["loss_first"], m["loss_last"] = one.loss_first, one.loss_last
        result.source("loss_last", "log: loss, the last line's")
    if one.reserved is not None:
        m["peak_memory_reserved_bytes"] = {"max": one.reserved * GIB}
        result.source("peak_memory_reserved_bytes", "log: memory (GiB, the device's peak reserved), the largest")
    if one.zero_memory:
        result.warnings.append(f"memory: 0.00GiB on {one.zero_memory:,} line(s): no reading (torchtitan prints 0 "
                               "where it reads no device memory), not a 0-byte peak")
    return result

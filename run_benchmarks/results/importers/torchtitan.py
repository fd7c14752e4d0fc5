"""torchtitan training logs: the metric line its MetricsProcessor logs at step 1 and every ``log_freq`` steps
(field table: torchtitan_fields.py), old and new,

    [rank0]:[titan] 2025-01-10 12:00:00,000 - root - INFO - step: 10  loss:  7.8125  grad_norm:  1.2031
    memory: 32.21GiB(40.62%)  tps: 1,234  tflops: 56.78  mfu: 18.23%
    [titan] 2024-06-01 12:00:00,000 - root - INFO - step: 10  loss:  7.8125  memory: 32.21GiB(40.62%)
    wps: 1,234  mfu: 18.23%

(one line; a terminal run colours each field with ANSI codes, stripped here). Several ranks may log
(``LOG_RANK=0,1,2,3``): each ``[rankN]:`` rank is kept apart and the figures come from the lowest rank with lines
after its warm-up; unprefixed lines repeat each step once per rank, and one line per step is kept (lines.py).
``validate step: ...`` lines are the validator's, not training throughput: left out, counted. ``memory: 0.00GiB``
is no reading (torchtitan prints it where it reads no device memory), never a 0-byte peak; the memory's share of
the device gives the device's size (checked against the declared hardware, crosscheck.py).

Every pattern matches in time linear in the line's length, and a step count longer than 18 digits is no count.
"""
from __future__ import annotations

import re
from pathlib import Path

from run_benchmarks.results.importers import Imported, Span, read_lines, parser
from run_benchmarks.results.importers.line_figures import figures
from run_benchmarks.results.importers.lines import MAX_STEP_DIGITS, Errors, LineLog, Reading, rank_prefix
from run_benchmarks.results.importers.torchtitan_fields import TORCHTITAN

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = r"([-+]?(?:[\d,]+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))"
_STEP = re.compile(r"\bstep:\s*(\d+)\s")
_VALIDATION = re.compile(r"\bvalidat\w*\s+step:", re.IGNORECASE)
_FIELDS = {
    "loss": re.compile(r"\bloss:\s*" + _NUMBER),
    "grad_norm": re.compile(r"\bgrad_norm:\s*" + _NUMBER),
    "memory": re.compile(r"\bmemory:\s*" + _NUMBER + r"\s*GiB"),
    "memory (%)": re.compile(r"\bmemory:\s*[\d.,]+\s*GiB\s*\(\s*" + _NUMBER + "%"),
    "tps": re.compile(r"\btps:\s*" + _NUMBER),
    "wps": re.compile(r"\bwps:\s*" + _NUMBER),
    "tflops": re.compile(r"\btflops:\s*" + _NUMBER),
    "mfu": re.compile(r"\bmfu:\s*" + _NUMBER + "%"),
}
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, errors, log, zero_memory = Span(), Errors(), LineLog(TORCHTITAN, skip_intervals), 0
    for raw in read_lines(path, notes):
        rank, line = rank_prefix(_ANSI.sub("", raw))
        step = _STEP.search(line)
        if step and ("tps:" in line or "wps:" in line) and len(step.group(1)) <= MAX_STEP_DIGITS:
            if _VALIDATION.search(line):
                log.evaluations += 1
                continue
            values = TORCHTITAN.read((key, found.group(1)) for key, pattern in _FIELDS.items()
                                     if (found := pattern.search(line)))
            if values.get("memory_reserved_peak") == 0:
                zero_memory += 1
            elif "memory_reserved_peak" in values:
                log.peak("memory_reserved_peak", values["memory_reserved_peak"], rank)
                log.share(values["memory_reserved_peak"], values.get("memory_share", 0))
            log.add(Reading(int(step.group(1)), values, rank))
            stamp = _STAMP.search(line)
            if stamp:
                span.see(stamp.group(1))
        else:
            errors.see(line)
    result = figures(log, world_size, span, errors, notes)
    if zero_memory:
        result.warnings.append(f"memory: 0.00GiB on {zero_memory:,} line(s): no reading (torchtitan prints 0 "
                               "where it reads no device memory), not a 0-byte peak")
    return result


PARSER = parser("torchtitan", 1, "torchtitan metric lines, old and new (step, loss, grad_norm, memory GiB "
                                "reserved, tps/wps, tflops, mfu)")(parse)

"""Megatron-LM / Megatron-Core and Megatron-DeepSpeed training logs: their ``iteration N/M | key: value | ...``
lines, the memory report and the arguments printed at the start (field tables: megatron_fields.py).

     [2025-05-01 12:00:00.123456] iteration      100/    1000 | consumed samples:        51200 | elapsed time per
     iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 150.2 | learning rate: 1.500000E-04 | global
     batch size:   512 | lm loss: 2.345000E+00 | loss scale: 1.0 | grad norm: 0.912 | number of skipped
     iterations:   0 | number of nan iterations:   0 |
    [Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.5 | max allocated: 2345.6 | reserved: 3000.0 | ...

A time stamp with or without its microseconds, a memory line with or without its ``[Rank N]`` prefix, a
launcher's rank prefix on any line (lines.py) and ``validation loss at iteration N`` lines (left out, counted)
are all read. Which lines count, how much each covers, the warm-up, the rank and the cross-checks: lines.py,
line_figures.py, crosscheck.py; a run whose every iteration the loss scaler skipped is flagged (untrained.py).

Every pattern is unambiguous (no two quantifiers can trade characters), so a 1 MiB line costs linear time, and a
step count longer than 18 digits is no count.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import Imported, Span, read_lines
from run_benchmarks.results.importers.fields import FieldTable
from run_benchmarks.results.importers.line_figures import figures, table_parser
from run_benchmarks.results.importers.lines import MAX_STEP_DIGITS, Errors, LineLog, Reading, pipe_pairs, rank_prefix
from run_benchmarks.results.importers.megatron_fields import MEGATRON, MEGATRON_DEEPSPEED

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
_STAMP = re.compile(r"^\s*\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d{1,9})?\]")
_MEMORY = re.compile(r"(?:\[Rank (\d{1,6})\] )?\(after (\d+) iterations\) memory \(MB\)(.*)")
_ARGUMENT = re.compile(r"^\s*(\w{1,80}) \.{3,} (\S{1,40})\s*$")


def read(path: Path, table: FieldTable, world_size: Optional[int], skip_intervals: int) -> Imported:
    notes: list[str] = []
    span, errors, log = Span(), Errors(), LineLog(table, skip_intervals)
    for raw in read_lines(path, notes):
        rank, line = rank_prefix(raw)
        stamp = _STAMP.match(line)
        if stamp:
            span.see(stamp.group(1))
        iteration = _ITERATION.search(line) if "iteration" in line else None
        if "validation loss at" in line:  # an evaluation's line: not training
            log.evaluations += 1
        elif iteration and len(iteration.group(1)) <= MAX_STEP_DIGITS:
            values = table.read(pipe_pairs(iteration.group(3)))
            if "step_time_s" in values:
                if "seq_len" in values:
                    log.setting("seq_len", values["seq_len"])
                log.add(Reading(int(iteration.group(1)), values, rank))
        elif "memory (MB)" in line and (memory := _MEMORY.search(line)):
            reported = int(memory.group(1)) if memory.group(1) else rank
            for meaning, value in table.read(pipe_pairs(memory.group(3))).items():
                if meaning.endswith("_peak"):
                    log.peak(meaning, value, reported)
        elif " ..." in line and (argument := _ARGUMENT.match(line)):
            for meaning, value in table.read([argument.groups()]).items():
                log.setting(meaning, value)
        errors.see(line)
    return figures(log, world_size, span, errors, notes)


MEGATRON_PARSER = table_parser(
    "megatron", 1,
    "Megatron-LM / Megatron-Core iteration lines (step time, TFLOP/s/GPU, skipped iterations), "
    "memory (MB) with or without [Rank N], arguments",
    read, MEGATRON)
DEEPSPEED_PARSER = table_parser(
    "megatron-deepspeed", 1,
    "Megatron-DeepSpeed iteration lines (samples per second, tgs, TFLOPs, actual seqlen), memory "
    "(MB)",
    read, MEGATRON_DEEPSPEED)
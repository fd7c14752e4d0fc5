"""NeMo training logs (field tables: nemo_fields.py): NeMo 1's progress bar and NeMo 2's ProgressPrinter lines,

    Epoch 0: :  20%|██        | 10/50 [00:30<02:00, reduced_train_loss=6.130, global_step=9.000,
    consumed_samples=2560.0, train_step_timing in s=2.980]
    Training epoch 0, iteration 10/100 | lr: 1.499e-06 | global_batch_size: 256 | global_step: 9 |
    reduced_train_loss: 11.03 | train_step_timing in s: 3.185 | TFLOPS_per_GPU: 543.2 | consumed_samples: 2560

each read with its own table (one step per NeMo 1 refresh, one log interval per NeMo 2 line), and the config
NeMo 1 prints at the start (``global_batch_size``, ``encoder_seq_length``). Samples/s is the global batch over
the step time; NeMo prints no tokens/s, so tokens/s is the samples/s x the log's sequence length where it states
one (else the case's: case_facts.py). Validation progress (``Validation ...``) is left out, counted. The bar's
values have 3 significant digits, so figures derived from them carry that rounding.

Splitting on ``|``, ``,`` and ``=`` keeps every line linear in its length.
"""
from __future__ import annotations

import re
from pathlib import Path

from run_benchmarks.results.importers import Imported, Span, read_lines, parser
from run_benchmarks.results.importers.line_figures import figures
from run_benchmarks.results.importers.lines import (MAX_STEP_DIGITS, Errors, LineLog, Reading, pipe_pairs,
                                                    rank_prefix)
from run_benchmarks.results.importers.nemo_fields import NEMO1, NEMO2

_BAR = re.compile(r"\|\s*(\d{1,18})/(?:\d{1,18}|\?) \[")
_PRINTER = re.compile(r"^Training epoch \d{1,9}, iteration (\d{1,18})/\S{1,20} \|(.*)")
_STAMP = re.compile(r"\[NeMo \w (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_CONFIG = re.compile(r"^\s{2,40}(global_batch_size|encoder_seq_length): (\d{1,12})\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)")


def bar_pairs(text: str) -> list[tuple[str, str]]:
    """``key=value`` of a tqdm postfix (``..., reduced_train_loss=6.130, train_step_timing in s=2.980]``)."""
    out = []
    for piece in text.rstrip().rstrip("]").split(","):
        key, equals, value = piece.partition("=")
        if equals and _NUMBER.fullmatch(value.strip()):
            out.append((key.strip(), value.strip()))
    return out


def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, errors = Span(), Errors()
    logs = {"nemo1": LineLog(NEMO1, skip_intervals), "nemo2": LineLog(NEMO2, skip_intervals)}
    for raw in read_lines(path, notes):
        rank, line = rank_prefix(raw)
        stamp = _STAMP.search(line) if "[NeMo" in line else None
        if stamp:
            span.see(stamp.group(1))
        if line.lstrip().startswith(("Validation", "Sanity Checking", "Testing")):
            logs["nemo2" if ": iteration" in line else "nemo1"].evaluations += 1
        elif line.startswith("Training epoch") and (printer := _PRINTER.match(line)):
            _add(logs["nemo2"], int(printer.group(1)), pipe_pairs(printer.group(2)), rank)
        elif "Epoch" in line and "=" in line and (bar := _BAR.search(line)):
            _add(logs["nemo1"], int(bar.group(1)), bar_pairs(line[bar.end():].partition(", ")[2]), rank)
        elif (config := _CONFIG.match(line)):
            for log in logs.values():
                for meaning, value in log.table.read([config.groups()]).items():
                    log.setting(meaning, value)
        errors.see(line)
    chosen = max(logs.values(), key=lambda log: sum(len(s.steps) for s in log.series.values()))
    return figures(chosen, world_size, span, errors, notes)


PARSER = parser("nemo", 1, "NeMo 1 progress bar (train_step_timing in s, reduced_train_loss) and NeMo 2 "
                          "ProgressPrinter lines (TFLOPS_per_GPU, global_batch_size, peak_memory_usage)")(parse)


def _add(log: LineLog, step: int, pairs: list, rank) -> None:
    if len(str(step)) > MAX_STEP_DIGITS:
        return
    values = log.table.read(pairs)
    named = dict(pairs)
    if "global_step" in named:  # NeMo 2's count across epochs (its iteration restarts with each epoch)
        try:
            step = int(float(named["global_step"])) + 1
        except ValueError:
            pass
    for meaning in ("memory_allocated_peak", "memory_reserved_peak"):
        if meaning in values:
            log.peak(meaning, values[meaning], rank)
    if "step_time_s" in values:
        log.add(Reading(step, values, rank))

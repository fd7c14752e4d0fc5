"""PaddleNLP, PaddleFormers and ERNIEKit trainer logs (field tables: paddle_fields.py): the interval lines their
Trainer prints every ``logging_steps`` steps,

    [2024-05-01 10:00:00,000] [    INFO] - loss: 7.1, learning_rate: 3e-05, global_step: 20, max_memory_allocated:
    25.3, max_memory_reserved: 31.0, interval_runtime: 12.3, interval_samples_per_second: 2.6,
    interval_tokens_per_second_per_device: 2660.1, interval_steps_per_second: 0.08, ...

(ERNIEKit: ``global_runtime``, ``global_samples_per_second``, ``tokens_per_sec_per_card``, ...), the arguments the
Trainer prints at the start (``logging_steps``, ``per_device_train_batch_size``, ...: they state the interval and
the batch the cross-checks need), the end-of-run summary (``train_samples_per_second``, ``train_loss``; the
``***** train metrics *****`` block too) and the fine-tuning script's "Effective tokens per second"; and the
older model-zoo scripts' line ``global step 10, ..., speed: 1.92 step/s, ips_total: 15728 tokens/s, ips: 1966
tokens/s`` (or ``ips: 12.5 seqs/s``), whose ``ips`` is per card.

The headline is the interval lines' time-weighted means after the warm-up (line_figures.py); the 2022 Trainer's
``interval_samples_per_second`` (one step's samples on one device over the whole interval) contradicts the step
time and batch and is left out, named (crosscheck.py). The summary's whole-run figures, warm-up included, are
kept beside them under their own names, with a warning where they differ past ``AGREE``; the run's final loss is
the summary's ``train_loss`` where it is logged. PaddleFormers' "All steps were skipped" flags a run that trained
nothing (untrained.py). Every pattern matches in time linear in the line's length.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import Imported, Span, read_lines
from run_benchmarks.results.importers.fields import SETTINGS, FieldTable
from run_benchmarks.results.importers.line_figures import figures, table_parser
from run_benchmarks.results.importers.lines import MAX_STEP_DIGITS, Errors, LineLog, Reading, rank_prefix
from run_benchmarks.results.importers.paddle_fields import ERNIEKIT, PADDLEFORMERS, PADDLENLP

# A key starts at a word's start only ((?<!\w)), so a long run of word characters is scanned once, not once
# per character; the number is unambiguous: a 1 MiB line costs linear time.
_NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))"
_PAIR = re.compile(r"(?<!\w)(\w+): " + _NUM)
_STEP = re.compile(r"(?<!\w)global_step: (\d{1,18})\b")
_SETTING = re.compile(r"\] - (\w{1,80}) *: ?" + _NUM + r" *$")
_SUMMARY = re.compile(r"(?<!\w)(train_\w+)\s+=\s+" + _NUM + r"\s*$")
_EFFECTIVE = re.compile(r"effective[ _]tokens[ _]per[ _]second\W{0,4}" + _NUM, re.IGNORECASE)
_OLD = re.compile(r"\bglobal step:? ?(\d{1,18})\b")
_IPS = re.compile(r"(?<!\w)(ips|ips_total): " + _NUM + r" ?(\w+)/s")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_SPEED_KEYS = ("interval_samples_per_second", "interval_steps_per_second", "interval_tokens_per_second_per_device",
               "global_samples_per_second", "global_steps_per_second", "tokens_per_sec_per_card")
_SEQ = {"max_seq_len": "max_seq_length"}  # ERNIEKit's and PaddleFormers' name of the same argument
SKIPPED = "All steps were skipped"
AGREE = 0.10


def _interval(line: str, table: FieldTable) -> Optional[tuple[int, dict]]:
    """(step, values) of a Trainer interval line or an older ``global step`` line, else None."""
    if any(key in line for key in _SPEED_KEYS):
        step = _STEP.search(line)
        return (int(step.group(1)), table.read(_PAIR.findall(line))) if step else None
    old = _OLD.search(line) if "speed: " in line else None
    if old is None:
        return None
    pairs = _PAIR.findall(line)
    pairs += [(f"{key} ({'tokens' if unit.lower().startswith('token') else 'seqs'}/s)", value)
              for key, value, unit in _IPS.findall(line)]
    return int(old.group(1)), table.read(pairs)


def _setting(line: str, table: FieldTable) -> Optional[tuple[str, float]]:
    """(meaning, value) of an argument line that states a setting (``logging_steps   : 10``), else None."""
    found = _SETTING.search(line) if "] - " in line else None
    if found is None:
        return None
    key, value = found.groups()
    for meaning, number in table.read([(_SEQ.get(key, key), value)]).items():
        if meaning in SETTINGS:
            return meaning, number
    return None


def read(path: Path, table: FieldTable, world_size: Optional[int], skip_intervals: int) -> Imported:
    notes: list[str] = []
    span, errors, log = Span(), Errors(), LineLog(table, skip_intervals)
    summary: dict[str, float] = {}
    for raw in read_lines(path, notes):
        rank, line = rank_prefix(raw)
        stamp = _STAMP.match(line)
        if stamp:
            span.see(stamp.group(1))
        found = _interval(line, table) if len(line) and "eval_" not in line else None
        if found is not None and len(str(found[0])) <= MAX_STEP_DIGITS:
            step, values = found
            for meaning in ("memory_allocated_peak", "memory_reserved_peak"):
                if meaning in values:
                    log.peak(meaning, values[meaning], rank)
            log.add(Reading(step, values, rank))
        elif "eval_" in line and ("eval_loss" in line or "eval_runtime" in line):
            log.evaluations += 1
        elif (said := _setting(line, table)) is not None:  # an argument the Trainer printed: name  : value
            log.setting(*said)
        elif "train_" in line:
            summary.update({k: float(v) for k, v in _PAIR.findall(line) if k.startswith("train_")})
            summary.update({k: float(v) for k, v in _SUMMARY.findall(line)})
        if "ffective" in line and (effective := _EFFECTIVE.search(line)):
            summary["effective_tokens_per_second"] = float(effective.group(1))
        if SKIPPED in line:
            log.untrained.append(f'the log says "{SKIPPED}"')
        errors.see(line)
    result = figures(log, world_size, span, errors, notes)
    _summary_figures(result, summary)
    return result


def _summary_figures(result: Imported, summary: dict) -> None:
    """The end-of-run summary beside the interval means, each named, and the run's final train_loss."""
    m = result.metrics
    if "train_loss" in summary:
        if m.get("loss_last") is not None:
            m["loss_last_interval"] = m["loss_last"]
            result.source("loss_last_interval", "log: loss of the last interval line")
        m["loss_last"] = summary["train_loss"]
        result.source("loss_last", "log: train_loss of the end-of-run summary (the trainer's mean over the run)")
    run = summary.get("train_samples_per_second")
    if run is not None:
        m["samples_per_s_run"] = run
        result.source("samples_per_s_run", "log: train_samples_per_second of the end-of-run summary (the whole "
                                           "run, warm-up included)")
        interval = m.get("samples_per_s")
        if interval and abs(run / interval - 1) > AGREE:
            result.warnings.append(f"the end-of-run train_samples_per_second {run:,.4g} (warm-up included) and "
                                   f"the interval mean {interval:,.4g} differ by {run / interval - 1:+.1%}: the "
                                   "interval mean is the headline")
    if "effective_tokens_per_second" in summary:
        m["effective_tokens_per_s_logged"] = summary["effective_tokens_per_second"]
        result.source("effective_tokens_per_s_logged", "log: Effective Tokens per second (the script's whole-run "
                                                       "figure, padding left out, as it counts it)")
    if "train_runtime" in summary:
        result.details["train_runtime_s"] = summary["train_runtime"]


PADDLENLP_PARSER = table_parser(
    "paddlenlp", 1,
    "PaddleNLP Trainer interval lines (2022 to today), arguments, end-of-run summary; older "
    "global-step lines",
    read, PADDLENLP)
PADDLEFORMERS_PARSER = table_parser(
    "paddleformers", 1,
    "PaddleFormers Trainer interval lines, arguments, end-of-run summary",
    read, PADDLEFORMERS)
ERNIEKIT_PARSER = table_parser(
    "erniekit", 1,
    "ERNIEKit trainer lines (global_samples_per_second, tokens_per_sec_per_card, "
    "TFLOPS_per_sec_per_card, max_mem_allocated_gb)",
    read, ERNIEKIT)
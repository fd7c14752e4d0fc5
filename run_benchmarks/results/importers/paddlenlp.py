"""PaddleNLP trainer logs (version 1): the interval lines its Trainer prints every logging step,

    [2024-05-01 10:00:00,000] [    INFO] - loss: 7.1, learning_rate: 3e-05, global_step: 20,
    current_memory_allocated: 20.5, current_memory_reserved: 30.1, max_memory_allocated: 25.3,
    max_memory_reserved: 31.0, interval_runtime: 12.3, interval_samples_per_second: 2.6,
    interval_tokens_per_second_per_device: 2660.1, interval_steps_per_second: 0.08, ...

the end-of-run summary (the trainer's ``speed_metrics``, logged as ``key: value`` and again as
``***** train metrics *****`` with ``  key = value`` lines: ``train_runtime``, ``train_samples_per_second``,
``train_steps_per_second``, ``train_loss``) and the "Effective Tokens per second" line the fine-tuning
script prints in benchmark mode; and the older scripts' line

    global step 10, epoch: 0, batch: 9, loss: 9.87, avg_batch_cost: 0.52 sec, speed: 1.92 step/s,
    ips_total: 15728 tokens/s, ips: 1966 tokens/s          (or: ips: 12.5 seqs/s)

Figures, each with its source (``metrics["sources"]``): the interval means after the first
``skip_intervals`` intervals (warm-up: compilation, allocator growth) are the headline, as accelbench
excludes its own warm-up; the summary's whole-run figures, warm-up included, are kept beside them under
their own names (``samples_per_s_run``, ``effective_tokens_per_s_logged``), with a warning where they differ
past ``AGREE``. The run's final loss is the summary's ``train_loss`` (the trainer's mean over the run's
steps) where it is logged, else the last interval's. The older line's ``ips`` is per device (those scripts
compute it from the per-card batch; ``ips_total`` is the job's), its ``speed`` steps/s.

Memory fields are GiB (the trainer divides the allocator's bytes by 1024**3); both peaks are kept, named:
``max_memory_allocated`` as ``peak_memory_bytes`` (memory_kind allocated) and ``max_memory_reserved`` as
``peak_memory_reserved_bytes``. The lines are read as a stream and folded as they come (a sum and a count
per figure are kept); the patterns match in time linear in the line's length. A nan, infinite or negative
value stays in its mean for the figure checks to name (``figure_checks``: the import is then failed).
"""
from __future__ import annotations

import math
import re
from array import array
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import Imported, Span, clip, higher, line_log_result, read_lines, register

# A key starts at a word's start only ((?<!\w)), so a long run of word characters is scanned once, not once
# per character; the number is unambiguous: a 1 MiB line costs linear time.
_NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))"
_PAIR = re.compile(r"(?<!\w)(\w+): " + _NUM)
_SUMMARY = re.compile(r"(?<!\w)(train_\w+)\s+=\s+" + _NUM + r"\s*$")
_EFFECTIVE = re.compile(r"effective[ _]tokens[ _]per[ _]second\W{0,4}" + _NUM, re.IGNORECASE)
_OLD = re.compile(r"\bglobal step:? ?(\d{1,18})\b")
_IPS = re.compile(r"(?<!\w)(ips|ips_total): " + _NUM + r" ?(\w+)/s")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
GIB = 1 << 30
MEANS = ("interval_tokens_per_second_per_device", "interval_samples_per_second", "interval_steps_per_second",
         "ips_tokens", "ips_total_tokens", "ips_samples", "speed")
AGREE = 0.10


def _interval(line: str) -> Optional[dict]:
    """The figures of a Trainer interval line or an older ``global step`` line, or None."""
    if "interval_tokens_per_second_per_device" in line or "interval_samples_per_second" in line:
        return {k: float(v) for k, v in _PAIR.findall(line)}
    if _OLD.search(line) and "speed: " in line:
        values = {k: float(v) for k, v in _PAIR.findall(line)}
        for key, value, unit in _IPS.findall(line):
            kind = "tokens" if unit.lower().startswith("token") else "samples"
            values[f"{key}_{kind}"] = float(value)
        return values
    return None


@register("paddlenlp", 1, "PaddleNLP Trainer interval lines and end-of-run summary; older global-step lines")
def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    notes: list[str] = []
    span, error, count = Span(), None, 0
    sums = {key: array("d") for key in MEANS}  # over the measured intervals, summed exactly at the end
    allocated = reserved = loss_first = loss_last = None
    summary: dict[str, float] = {}
    for line in read_lines(path, notes):
        stamp = _STAMP.match(line)
        if stamp:
            span.see(stamp.group(1))
        interval = _interval(line)
        if interval is not None:
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
        elif "train_" in line:
            summary.update({k: float(v) for k, v in _PAIR.findall(line) if k.startswith("train_")})
            summary.update({k: float(v) for k, v in _SUMMARY.findall(line)})
        if "ffective" in line and (effective := _EFFECTIVE.search(line)):
            summary["effective_tokens_per_second"] = float(effective.group(1))
        if line.startswith("Traceback (most recent call last)"):
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
    means = {k: math.fsum(sums[k]) / len(sums[k]) for k in MEANS if sums[k]}
    _interval_figures(result, means, count - skip_intervals, skip_intervals)
    _memory_and_loss(result, allocated, reserved, loss_first, loss_last)
    _summary_figures(result, summary, means)
    return result


def _interval_figures(result: Imported, means: dict, measured: int, skipped: int) -> None:
    m = result.metrics
    over = f"mean of {measured} interval(s) after the first {skipped}"
    for key, figure, text in (
            ("interval_tokens_per_second_per_device", "tokens_per_s_per_device", "interval_tokens_per_second_per_device"),
            ("ips_tokens", "tokens_per_s_per_device", "ips (tokens/s per device)"),
            ("ips_total_tokens", "tokens_per_s_total", "ips_total (tokens/s of the job)"),
            ("interval_samples_per_second", "samples_per_s", "interval_samples_per_second"),
            ("ips_samples", "samples_per_s_per_device", "ips (samples/s per device: the older scripts' per-card "
                                                        "batch)")):
        if key in means and m.get(figure) is None:
            m[figure] = means[key]
            result.source(figure, f"log: {text}, {over}")
    steps_per_s = means.get("interval_steps_per_second") or means.get("speed")
    if steps_per_s:
        m["step_time_s"] = {"median": 1 / steps_per_s}
        result.source("step_time_s", f"derived: 1 / the {over} of "
                                     + ("interval_steps_per_second" if "interval_steps_per_second" in means
                                        else "speed (steps/s)"))


def _memory_and_loss(result: Imported, allocated, reserved, loss_first, loss_last) -> None:
    m = result.metrics
    if allocated is not None:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": allocated * GIB}, "allocated"
        result.source("peak_memory_bytes", "log: max_memory_allocated (GiB), the largest")
    if reserved is not None:  # what the device had to hold (the allocator's cache too): often far above allocated
        m["peak_memory_reserved_bytes"] = {"max": reserved * GIB}
        result.source("peak_memory_reserved_bytes", "log: max_memory_reserved (GiB), the largest")
    if loss_first is not None:
        m["loss_first"], m["loss_last"] = loss_first, loss_last
        result.source("loss_last", "log: loss of the last interval line")


def _summary_figures(result: Imported, summary: dict, means: dict) -> None:
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

"""A line log's figures: the chosen rank's steady lines combined, cross-checked, and stored with their sources.

Over the steady lines (lines.py: after the warm-up, each covering one log interval), a rate is combined by time:
sum(rate x steps x step time) / sum(steps x step time), i.e. what the steps did over how long they took (with no
step time printed, sum(steps) / sum(steps / rate): the same for a constant batch). Step time statistics are over
the lines' means. Samples/s from a global batch is sum(batch x steps) / sum(step time x steps), so a batch
ramp-up weighs right. A rate printed as 0 on a line is no reading (torchtitan's tflops where it counts no
FLOPs) and leaves that figure out; a nan, infinite or negative one stays, for the figure checks to name.

Then crosscheck.py checks the figures against each other; a field that contradicts the rest is named in a
warning, kept under ``metrics["contradictions"]`` and never becomes the headline. Last, untrained.py flags a
run that trained nothing.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

from run_benchmarks.results.figures.analyze import Stats
from run_benchmarks.results.importers import Imported, Parser, Span, line_log_result, parser
from run_benchmarks.results.importers import crosscheck, untrained
from run_benchmarks.results.importers.lines import RATES, Coverage, Errors, LineLog, Series

# the headline figure of each meaning, and its store name
PUBLISH = (("samples_per_s", "samples_per_s"), ("samples_per_s_per_device", "samples_per_s_per_device"),
           ("tokens_per_s_per_device", "tokens_per_s_per_device"), ("tokens_per_s", "tokens_per_s_total"),
           ("tflops_per_device", "tflops_per_device_logged"), ("mfu", "mfu_logged"))


def table_parser(fmt: str, version: int, description: str, read: Callable[..., Imported], table) -> Parser:
    """``read(path, table, world_size, skip_intervals)`` as the parser ``fmt/version``: one reader of a line
    shape serves every format whose field table it is given (Megatron-LM and Megatron-DeepSpeed, ...)."""
    def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
        return read(path, table, world_size, skip_intervals)

    parse.__name__ = parse.__qualname__ = f"parse_{table.format}"
    return parser(fmt, version, description)(parse)


def figures(log: LineLog, world_size: Optional[int], span: Span, errors: Errors, notes: list[str]) -> Imported:
    """The import of a line log: when it ran, its figures with their sources, its warnings and flags."""
    rank, series, cover = log.chosen()
    result = line_log_result(world_size, len(series.steps), log.skip_intervals, span, errors.error)
    result.warnings.extend(notes)
    prefixed = sorted(r for r in log.series if r is not None)
    result.details.update(rank=rank, ranks_logging=len(prefixed) or None, validation_lines=log.evaluations,
                          repeated_lines=series.repeats)
    if cover is not None:
        result.details.update(interval=cover.interval, interval_from=cover.interval_source,
                              measured=len(cover.steady))
    _rank_notes(result, log, rank, prefixed, series)
    means = combine(series, cover) if cover else {}
    if cover and cover.steady:
        checked = crosscheck.check(means, log, world_size)
        _publish(result, log, means, checked, cover)
    elif series.steps:
        result.warnings.append(f"{len(series.steps)} line(s), none after the {log.skip_intervals} warm-up "
                               "interval(s): no step time or throughput")
    _memory_and_loss(result, log, series)
    untrained.flag(result, log, series, cover)
    return result


def combine(series: Series, cover: Coverage) -> dict:
    """The steady lines' means, by meaning (``step_time_s`` as Stats), and the batch-derived rates."""
    lines, cols = cover.steady, series.columns
    steps = [cover.covers[i] for i in lines]
    out: dict = {"lines": len(lines)}
    tau = None
    if series.has("step_time_s", lines):
        tau = [cols["step_time_s"][i] for i in lines]
    elif series.has("steps_per_s", lines) and all(cols["steps_per_s"][i] for i in lines):
        tau = [1 / cols["steps_per_s"][i] for i in lines]
    if tau is not None:
        out["step_time_s"] = Stats.of(tau)
        out["step_time_from"] = "step_time_s" if series.has("step_time_s", lines) else "steps_per_s"
        total_time = math.fsum(c * t for c, t in zip(steps, tau))
        out["mean_step_s"] = total_time / sum(steps) if sum(steps) else math.nan
    for key in RATES:
        if not series.has(key, lines) or any(cols[key][i] == 0 for i in lines):
            continue
        rates = [cols[key][i] for i in lines]
        if tau is not None and math.isfinite(total_time) and total_time > 0:
            out[key] = math.fsum(r * c * t for r, c, t in zip(rates, steps, tau)) / total_time
        else:
            denominator = math.fsum(c / r for c, r in zip(steps, rates))
            out[key] = sum(steps) / denominator if denominator else math.inf
    for key, derived in (("global_batch", "samples_per_s_from_batch"), ("tokens_per_step", "tokens_per_s_from_steps")):
        if series.has(key, lines):
            out[key] = cols[key][lines[-1]]
            if tau is not None and total_time:
                out[derived] = math.fsum(cols[key][i] * c for i, c in zip(lines, steps)) / total_time
    return out


def _publish(result: Imported, log: LineLog, means: dict, checked: "crosscheck.Checked", cover: Coverage) -> None:
    m, key_of = result.metrics, log.table.key_of
    over = (f"time-weighted over {len(cover.steady)} line(s) after the first {cover.warmup} (warm-up), each "
            f"covering one log interval of {cover.interval} step(s) ({cover.interval_source})")
    if "step_time_s" in means:
        m["step_time_s"] = asdict(means["step_time_s"])
        how = key_of(means["step_time_from"])
        result.source("step_time_s", f"log: {how}" + (" (1 / steps/s)" if means["step_time_from"] == "steps_per_s"
                                                      else "") + f", statistics over {len(cover.steady)} line(s)")
    for meaning, name in PUBLISH:
        if meaning in checked.values:
            value, text = checked.values[meaning]
            m[name] = value
            result.source(name, text or f"log: {_named(log.table, meaning)}, {over}")
    if means.get("global_batch") and float(means["global_batch"]).is_integer():
        m["samples_per_step"] = int(means["global_batch"])
        result.source("samples_per_step", f"log: {key_of('global_batch')}, the last line's")
    if checked.contradictions:
        m["contradictions"] = dict(checked.contradictions)
    result.warnings.extend(checked.warnings)
    if checked.seq_len:
        result.stated.setdefault("seq_len", int(checked.seq_len))


def _named(table, meaning: str) -> str:
    """``tps (tokens/s per device)``: a field's printed key and what it counts."""
    found = table.by_key.get(table.key_of(meaning))
    if found is None:
        return meaning
    own = f"; {found.note}" if meaning in ("tflops_per_device", "mfu") and found.note else ""  # whose FLOP count
    return f"{found.key} ({found.unit}{' per device' if found.per == 'device' and '/s' in found.unit else ''}{own})"


def _memory_and_loss(result: Imported, log: LineLog, series: Series) -> None:
    m, memory, key_of = result.metrics, log.memory, log.table.key_of
    ranks = (f", the largest over {len(log.memory_ranks)} rank(s)" if len(log.memory_ranks) > 1 else
             ", the largest reading")
    if memory.get("memory_allocated_peak") is not None:
        m["peak_memory_bytes"], m["memory_kind"] = {"max": memory["memory_allocated_peak"]}, "allocated"
        result.source("peak_memory_bytes", f"log: {key_of('memory_allocated_peak')}{ranks}")
    if memory.get("memory_reserved_peak") is not None:
        m["peak_memory_reserved_bytes"] = {"max": memory["memory_reserved_peak"]}
        result.source("peak_memory_reserved_bytes", f"log: {key_of('memory_reserved_peak')}{ranks}")
    device = memory.get("device_bytes")
    if device is not None and math.isfinite(device) and device > 0:
        m["memory_device_bytes_logged"] = device
        result.source("memory_device_bytes_logged", f"derived: {key_of('memory_reserved_peak')} / its share of the "
                                                    f"device ({key_of('memory_share')})")
    if series.loss_first is not None:
        m["loss_first"], m["loss_last"] = series.loss_first, series.loss_last
        result.source("loss_last", f"log: {key_of('loss')}, the last line's")


def _rank_notes(result: Imported, log: LineLog, rank, prefixed: list, series: Series) -> None:
    if len(prefixed) > 1:
        result.warnings.append(f"{len(prefixed)} ranks log metric lines (ranks {prefixed[0]}-{prefixed[-1]}): "
                               f"rank {rank}'s kept, the others' left out (the figures come from the lowest rank "
                               "with lines after its warm-up)")
    if series.repeats:
        result.warnings.append(f"{series.repeats:,} metric line(s) repeat a step already logged (each rank logging "
                               "without a rank prefix): one line per step kept")
    if log.evaluations:
        result.warnings.append(f"{log.evaluations:,} validation line(s) ({log.table.evaluation}) left out: not "
                               "training throughput")
    if log.extra_ranks:
        result.warnings.append(f"{log.extra_ranks:,} line(s) of ranks past the first {len(log.series)} left out")

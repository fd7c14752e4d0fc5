"""How much an MLPerf log's training intervals trained, in how long: read by the benchmark table, never guessed.

Training runs in intervals: ``block_start``..``block_stop`` (else ``epoch_start``..``epoch_stop``), in the
file's order. The rules time a run from ``run_start`` to ``run_stop``, so an interval that starts at or after
``run_stop`` is no training (Stable Diffusion's last block), and one that ``run_stop`` cuts ends there. What an
interval trained is the benchmark's row of ``mlperf_benchmarks.yaml`` (``mlperf_table``):

- ``positions``: the position where it ends minus where it starts, in the row's unit (samples, tokens, or a
  fraction of an epoch), read only from the events and keys the row names. The start: the start event's own
  position, else the last one stated since the previous interval (0 at ``run_start``). The end: the stop
  event's own position past the start, else ``run_stop``'s when it falls inside the interval (DLRM's and
  R-GAT's runs stop inside their only epoch, at ``epoch_num`` 0.9), else the first one stated after the stop
  (NeMo's ``block_stop`` repeats its start's ``samples_count``; the evaluation after it states the end).
- ``block_size``: the block's own size (ResNet: ``epoch_count`` epochs).
- ``whole_epochs``: each complete epoch is one epoch (RetinaNet); one that ``run_stop`` cuts trained an
  unknown part of one and is left out.

Epochs become samples by the row's ``train_samples`` (the samples of one epoch, or its batches x
``global_batch_size``), checked against the dataset the rules fix. A log of a benchmark not in the table is read
by ``samples_count`` alone. Checks that refuse (no throughput, the reason stored): amounts that are not whole
steps of ``global_batch_size`` (of ``global_batch_size`` x ``max_sequence_length`` for tokens), and a
``train_samples`` logged after training began (a total) that differs from where the positions end; one logged
before training began is a budget, not a count, and is left alone. An interval's time is its duration less
the evaluations timed wholly inside it (``eval_start``..``eval_stop``): training time, as the blocks define it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from run_benchmarks.results.importers.mllog_events import Event, Log
from run_benchmarks.results.importers.mlperf_table import EVENTS, Benchmark

UNKNOWN = {key: "samples_count" for key in EVENTS}  # a benchmark not in the table: samples_count alone


@dataclass
class Interval:
    start: Event
    stop: Event
    end_ms: float
    cut: bool = False
    eval_s: float = 0.0
    evals: int = 0
    untimed: int = 0

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start.time_ms) / 1000 - self.eval_s


@dataclass
class Reading:
    """Per counted interval its amount (samples or tokens: ``unit``) and training seconds, and how it was read."""

    kind: str = "block"
    unit: str = ""
    amounts: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # file index of each counted interval's start
    how: str = ""
    notes: list[str] = field(default_factory=list)
    refused: str = ""
    end: Optional[float] = None  # where the last interval ends, in the row's unit


def intervals(log: Log, notes: list[str]) -> tuple[str, list[Interval]]:
    kind = "block" if log.first("block_start") else "epoch"
    out, open_, eval_open, incomplete = [], None, None, 0
    for event in log.events:
        if event.key == f"{kind}_start":
            incomplete += open_ is not None
            open_, eval_open = Interval(event, event, event.time_ms), None
        elif event.key == f"{kind}_stop" and open_ is not None:
            open_.stop, open_.end_ms = event, event.time_ms
            open_.untimed = max(0, open_.untimed - open_.evals)
            out.append(open_)
            open_ = None
        elif open_ is not None and event.key == "eval_start":
            eval_open = event.time_ms
        elif open_ is not None and event.key == "eval_stop" and eval_open is not None:
            open_.eval_s += (event.time_ms - eval_open) / 1000
            open_.evals, eval_open = open_.evals + 1, None
        elif open_ is not None and event.key == "eval_accuracy":
            open_.untimed += 1  # less the timed ones below: an evaluation logs its accuracy inside or after its stop
    if incomplete + (open_ is not None):
        notes.append(f"{incomplete + (open_ is not None)} {kind}(s) with no {kind}_stop left out")
    return kind, out


def _in_run(log: Log, kind: str, found: list[Interval], notes: list[str]) -> list[Interval]:
    start, stop = log.first("run_start"), log.first("run_stop")
    kept, after = [], 0
    for interval in found:
        if start is not None and interval.start.time_ms < start.time_ms:
            notes.append(f"a {kind} starts before run_start: no training of the run, left out")
        elif stop is not None and interval.start.time_ms >= stop.time_ms:
            after += 1
        else:
            if stop is not None and stop.time_ms < interval.stop.time_ms:
                interval.end_ms, interval.cut = stop.time_ms, True
            kept.append(interval)
    if after:
        notes.append(f"{after} {kind}(s) start at or after run_stop: no training of the run (the rules end it at "
                     "run_stop), left out")
    return kept


def read(log: Log, row: Optional[Benchmark], batch: Optional[int], seq: Optional[int]) -> Reading:
    reading = Reading()
    reading.kind, found = intervals(log, reading.notes)
    chosen = _in_run(log, reading.kind, found, reading.notes)
    if not chosen:
        return reading
    if row is not None and row.amount == "none":
        reading.refused = row.why or "no reading of this benchmark's keys"
        return reading
    unit = row.unit if row is not None else "samples"
    amount = row.amount if row is not None else "positions"
    amounts: list[Optional[float]]
    if amount == "positions":
        amounts = _by_positions(log, chosen, row.positions if row is not None else UNKNOWN, unit,
                                _total(log, row, chosen[0].start.index), reading)
        if not any(a is not None for a in amounts) and row is None:
            reading.refused = ("the benchmark is not in accelbench's MLPerf table (mlperf_benchmarks.yaml) and its "
                               "intervals state no samples_count: what its epoch_num, epoch_count or train_samples "
                               "count (samples, tokens, epochs, steps) is not known, so no throughput is read")
            return reading
    elif amount == "block_size":
        amounts = [_size(i, row.block_size) for i in chosen]
        reading.how = f"each block's {row.block_size} ({unit})"
    else:
        amounts = [None if i.cut else 1.0 for i in chosen]
        reading.how = "one epoch per complete epoch_start..epoch_stop"
    left = [i for i, a in zip(chosen, amounts) if a is None]
    if left:
        reading.notes.append(f"{len(left)} {reading.kind}(s) left out of the throughput: "
                             + ("cut by run_stop, part of an epoch" if amount == "whole_epochs" else
                                "no amount the table's keys state"))
    counted = [(i, a) for i, a in zip(chosen, amounts) if a is not None]
    if not counted:
        return reading
    reading.refused = _checks(log, row, unit, amount, counted, batch, seq, reading, chosen[0].start.index)
    if reading.refused:
        return reading
    scale, reading.unit = _to_samples(log, row, unit, batch, reading)
    if reading.refused:
        return reading
    for interval, a in counted:
        if interval.seconds <= 0:
            reading.refused = (f"a {reading.kind}'s evaluations take all its time ({interval.eval_s:,.3f} s): no "
                               "training time left")
            return reading
        reading.amounts.append(a * scale)
        reading.seconds.append(interval.seconds)
        reading.starts.append(interval.start.index)
    timed = [i for i, _ in counted if i.evals]
    if timed:
        reading.notes.append(f"{len(timed)} {reading.kind}(s) span evaluations: their "
                             f"{sum(i.evals for i in timed):,} evaluations' {math.fsum(i.eval_s for i in timed):,.1f} s "
                             "left out of the training time")
    if any(i.untimed for i, _ in counted):
        reading.notes.append(f"{sum(1 for i, _ in counted if i.untimed)} {reading.kind}(s) hold evaluations the log "
                             "does not time (no eval_start/eval_stop): their time counts as training time")
    return reading


def _position(event: Event, positions: dict) -> Optional[float]:
    key = positions.get(event.key)
    value = event.meta.get(key) if key else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _total(log: Log, row: Optional[Benchmark], first_start: int) -> Optional[float]:
    """What the run trained, where the row says train_samples counts it and it is logged after training began."""
    found = [e for e in log.values("train_samples") if e.value is not None and e.index > first_start]
    return found[-1].value if row is not None and row.train_samples == "total" and found else None


def _by_positions(log: Log, chosen: list[Interval], positions: dict, unit: str, total: Optional[float],
                  reading: Reading) -> list[Optional[float]]:
    stated = [(e.index, p) for e in log.events if (p := _position(e, positions)) is not None]
    stop = log.first("run_stop")
    run_stop = _position(stop, positions) if stop is not None else None
    run_start = log.first("run_start")
    out, previous_end, after, awaited, total_used = [], None, run_start.index if run_start else -1, 0, False
    for k, interval in enumerate(chosen):
        nxt = chosen[k + 1].start.index if k + 1 < len(chosen) else math.inf
        start = _position(interval.start, positions)
        if start is None:
            since = [p for i, p in stated if after < i <= interval.start.index]
            start = since[-1] if since else previous_end if previous_end is not None else 0.0 if k == 0 else None
        end = None
        if interval.cut:
            end = run_stop
        elif (own := _position(interval.stop, positions)) is not None and start is not None and own > start:
            end = own
        elif run_stop is not None and interval.start.time_ms <= stop.time_ms <= interval.stop.time_ms:
            end = run_stop
        else:
            later = [p for i, p in stated if interval.stop.index < i < nxt and (start is None or p > start)]
            end, awaited = (later[0], awaited + 1) if later else (None, awaited)
            if end is None and k == len(chosen) - 1 and total is not None:
                end, awaited, total_used = total, awaited + 1, True  # the run's total: where the last one ends
        out.append(end - start if start is not None and end is not None and end > start else None)
        previous_end, after = end, interval.stop.index
    reading.end = previous_end
    keys = ", ".join(sorted(set(positions.values())))
    reading.how = f"{keys} ({unit}) at each {reading.kind}'s start and end"
    if awaited:
        reading.how += (f" ({awaited} end at the position stated after their stop: the stop repeats or lacks it"
                        + (", the last at train_samples, the run's total)" if total_used else ")"))
    return out


def _size(interval: Interval, key: str) -> Optional[float]:
    value = interval.start.meta.get(key)
    if interval.cut or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _checks(log: Log, row: Optional[Benchmark], unit: str, amount: str, counted: list[tuple[Interval, float]],
            batch: Optional[int], seq: Optional[int], reading: Reading, first_start: int) -> str:
    """Why the amounts cannot be what the table says they are, or ''."""
    amounts = [a for _, a in counted]
    if amount == "positions" and row is not None and row.block_size:  # a block spans whole blocks of its size
        for interval, a in counted:
            size = _size(interval, row.block_size)
            if size and a % size:
                return (f"a {reading.kind} spans {a:,.0f} {unit} by its positions, not a whole number of its "
                        f"{row.block_size} {size:,.0f}")
    step = batch * seq if unit == "tokens" and batch and seq else batch if unit == "samples" else None
    if step and amount == "positions":
        odd = [a for a in amounts if a % step]
        if odd:
            return (f"{len(odd)} {reading.kind}(s) are not whole steps of {step:,} {unit} (the first: {odd[0]:,.0f}):"
                    f" the positions do not count {unit}")
    elif unit in ("samples", "tokens") and not batch:
        reading.notes.append("what the intervals count is not cross-checked: the log states no global_batch_size")
    totals = [e for e in log.values("train_samples") if e.value is not None]
    if row is not None and row.train_samples == "total" and totals:
        if totals[-1].index < first_start:
            reading.notes.append(f"train_samples {totals[-1].value:,.0f} is logged before training began: a budget, "
                                 "not a count of what ran; not used")
        elif reading.end is not None and totals[-1].value != reading.end:
            return (f"the {reading.kind}s end at {reading.end:,.0f} {unit}, but train_samples after training says "
                    f"{totals[-1].value:,.0f}")
    if amount == "block_size":
        done = max((_position(e, row.positions) or 0.0 for e in log.events), default=0.0)
        if done > math.fsum(amounts) + max(amounts):
            return (f"the blocks' {row.block_size} adds up to {math.fsum(amounts):,.0f} {unit}, but an evaluation is "
                    f"at {done:,.0f}: the blocks count something other than {unit}")
    return ""


def _to_samples(log: Log, row: Optional[Benchmark], unit: str, batch: Optional[int],
                reading: Reading) -> tuple[float, str]:
    """(factor, unit): epochs become samples by the row's train_samples; samples and tokens stay."""
    if unit != "epochs":
        return 1.0, unit
    counts = [e.value for e in log.values("train_samples") if e.value is not None]
    if not counts:
        reading.refused = "the intervals count epochs, but the log states no train_samples to size one"
        return 0.0, ""
    per_epoch = counts[0] * (batch or 0) if row.train_samples == "iterations_per_epoch" else counts[0]
    if not per_epoch:
        reading.refused = "train_samples counts the batches of an epoch, but the log states no global_batch_size"
        return 0.0, ""
    said = (f"train_samples {counts[0]:,.0f} x global_batch_size {batch:,}" if row.train_samples ==
            "iterations_per_epoch" else f"train_samples {counts[0]:,.0f}")
    if row.dataset_samples and abs(per_epoch - row.dataset_samples) >= max(batch or 1, 1):
        reading.refused = (f"{said} = {per_epoch:,.0f} samples an epoch, but the benchmark's dataset holds "
                           f"{row.dataset_samples:,}: the log's keys do not count what the table says")
        return 0.0, ""
    reading.how += f", epochs of {said} samples"
    return per_epoch, "samples"

"""MLPerf training logs (version 1): the ``:::MLLOG {json}`` lines mlperf_logging's mllog writes.

Each line is one event: ``{"namespace", "time_ms", "event_type", "key", "value", "metadata"}``.
Read here:

- ``run_start`` / ``run_stop``: MLPerf's own figure, time to train = run_stop - run_start (s); the
  status is run_stop's ``metadata.status`` (``success`` -> ok, ``aborted`` or anything else -> failed).
- ``block_start`` / ``block_stop`` (INTERVAL_START / INTERVAL_END): the training blocks between
  evaluations. A block's samples are the difference of the ``samples_count`` its start and stop
  carry (MLPerf counts samples from the run's start), or, in epoch-counted logs, its
  ``epoch_count`` x the ``train_samples`` event. Throughput (samples/s) = the blocks' samples / their
  summed duration, after the first ``skip_intervals`` blocks (warm-up: compilation, first batches).
- ``epoch_start`` / ``epoch_stop`` likewise (one epoch = ``train_samples``) when the log has no blocks
  (the rules ask for one or the other), and ``tracked_stats`` (value.throughput, samples/s per step)
  when it has neither.
- ``eval_accuracy`` (the last one), ``global_batch_size``, ``max_sequence_length``, ``train_samples``
  and the ``submission_*`` fields.

The mlperf-logging package (PyPI) writes these lines and checks a submission's rules, but computes
no throughput; a dependency only to split ``:::MLLOG`` from JSON is not worth it, so this reads the
JSON itself: the fields its compliance checker requires (training_6.1.0 common.yaml), checked
against what its ``mllog`` 4.1.68 writes.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from . import Imported, read_lines, register

MARK = ":::MLLOG "
SUBMISSION = ("submission_benchmark", "submission_org", "submission_platform", "submission_division",
              "submission_status")


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, timezone.utc).isoformat(timespec="seconds")


def _events(path: Path, warnings: list[str]) -> list[dict]:
    events = []
    for number, line in enumerate(read_lines(path), 1):
        at = line.find(MARK)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(MARK):])
        except json.JSONDecodeError as exc:
            warnings.append(f"{path}:{number}: not valid JSON after {MARK.strip()}: {exc}")
            continue
        if not isinstance(event, dict) or "key" not in event or not isinstance(event.get("time_ms"), (int, float)):
            warnings.append(f"{path}:{number}: an event needs a key and a numeric time_ms; left out")
            continue
        if not isinstance(event.get("metadata"), dict):
            event["metadata"] = {}
        events.append(event)
    return events


def _blocks(events: list[dict], train_samples, warnings: list[str],
            kind: str = "block") -> list[tuple[float, float]]:
    """(samples, seconds) per complete block (or epoch, ``kind``), in the log's order."""
    blocks, open_start = [], None
    for event in events:
        if event["key"] == f"{kind}_start":
            open_start = event
        elif event["key"] == f"{kind}_stop" and open_start is not None:
            start, stop, open_start = open_start, event, None
            seconds = (stop["time_ms"] - start["time_ms"]) / 1000
            first, last = start["metadata"].get("samples_count"), stop["metadata"].get("samples_count")
            if first is not None and last is not None and last > first:
                samples = last - first
            elif start["metadata"].get("epoch_count", 1 if kind == "epoch" else None) and train_samples:
                samples = start["metadata"].get("epoch_count", 1) * train_samples
            else:
                warnings.append(f"{kind} at {_iso(start['time_ms'])}: no samples_count on both ends nor "
                                "epoch_count with train_samples; left out of the throughput")
                continue
            if seconds > 0:
                blocks.append((float(samples), seconds))
    return blocks


@register("mllog", 1, "MLPerf :::MLLOG JSON lines (run_start/run_stop, block_start/block_stop samples_count)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    warnings: list[str] = []
    events = _events(path, warnings)
    last = {e["key"]: e for e in events}  # the last of each key (eval_accuracy: the final one)
    first = {}
    for event in events:
        first.setdefault(event["key"], event)
    result = Imported(status="ok", metrics={"world_size": world_size}, warnings=warnings,
                      details={k: last[k].get("value") for k in SUBMISSION if k in last})
    if not events:
        result.status, result.reason = "failed", f"no figure in the log: no {MARK.strip()} line"
        return result
    start, stop = first.get("run_start"), last.get("run_stop")
    if start:
        result.started_at = _iso(start["time_ms"])
    if stop:
        result.ended_at = _iso(stop["time_ms"])
        status = stop["metadata"].get("status", "success")
        if status != "success":
            result.status, result.reason = "failed", f"run_stop status {status!r}"
    else:
        result.status, result.reason = "failed", "no run_stop event: the run did not end"
    m = result.metrics
    if start and stop:
        result.wall_time_s = m["time_to_train_s"] = (stop["time_ms"] - start["time_ms"]) / 1000
    batch = last.get("global_batch_size", {}).get("value")
    if batch is not None:
        m["samples_per_step"] = int(batch)
    if "eval_accuracy" in last:
        m["eval_accuracy"] = float(last["eval_accuracy"]["value"])
        result.details["eval_samples_count"] = last["eval_accuracy"]["metadata"].get("samples_count")
    train_samples = last.get("train_samples", {}).get("value")
    blocks = _blocks(events, train_samples, warnings) or _blocks(events, train_samples, warnings, "epoch")
    measured = blocks[skip_intervals:]
    throughput = [float(e["value"]["throughput"]) for e in events if e["key"] == "tracked_stats"
                  and isinstance(e.get("value"), dict) and "throughput" in e["value"]]
    result.details.update(blocks=len(blocks), tracked_stats=len(throughput), skipped=skip_intervals)
    if measured:
        m["samples_per_s"] = math.fsum(s for s, _ in measured) / math.fsum(t for _, t in measured)
        result.details["throughput_from"] = "blocks"
    elif throughput[skip_intervals:]:
        kept = throughput[skip_intervals:]
        m["samples_per_s"] = math.fsum(kept) / len(kept)
        result.details["throughput_from"] = "tracked_stats"
    else:
        warnings.append(f"no throughput: {len(blocks)} block(s) with samples and {len(throughput)} "
                        f"tracked_stats value(s), none after the {skip_intervals} warm-up one(s)")
    seq = last.get("max_sequence_length", {}).get("value")
    if m.get("samples_per_s") and seq:
        m["tokens_per_s_total"] = m["samples_per_s"] * seq
        m["tokens_per_s_per_device"] = m["samples_per_s"] * seq / world_size
    return result

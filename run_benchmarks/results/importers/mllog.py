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

Hostile or broken lines: the log is read as a stream (``read_lines``: a line over the cap is skipped), and
only what the figures need is kept (a few numbers per block), so memory does not grow with the log. A line
whose JSON does not parse (nested deeper than Python parses included) or whose event lacks a text ``key``
is left out with a warning (the first 20 are kept, the rest counted). An event whose ``time_ms`` is no
time at all (nan, infinite, negative, past the year 9999) is left out and fails the import: durations
from such a clock mean nothing. A value of the wrong type (a text batch size, a list as accuracy) is left
out with a warning.
"""
from __future__ import annotations

import json
import math
from array import array
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import CappedWarnings, Imported, clip, number, read_lines, register, whole

MARK = ":::MLLOG "
SUBMISSION = ("submission_benchmark", "submission_org", "submission_platform", "submission_division",
              "submission_status")
LAST_TIME_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, the last time a datetime holds


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, timezone.utc).isoformat(timespec="seconds")


def _bad_time(time_ms) -> str:
    """Why ``time_ms`` (ms since 1970) is no time stamp, or ''."""
    if not math.isfinite(time_ms):
        return "is not finite"
    if time_ms < 0:
        return "is negative (a time stamp counts ms since 1970)"
    if time_ms > LAST_TIME_MS:
        return "is past the year 9999"
    return ""


class _Intervals:
    """The complete blocks (or epochs) of a log in its order, three numbers each: samples (nan where only an
    epoch count is known, resolved with ``train_samples`` at the end), epochs, seconds."""

    def __init__(self, kind: str):
        self.kind = kind
        self.open: Optional[tuple[float, Optional[float], Optional[float]]] = None
        self.samples, self.epochs, self.seconds = array("d"), array("d"), array("d")

    def event(self, key: str, time_ms: float, metadata: dict, warnings: CappedWarnings, where: str) -> None:
        if key == f"{self.kind}_start":
            epoch_count = number(metadata.get("epoch_count", 1 if self.kind == "epoch" else None))
            self.open = (time_ms, number(metadata.get("samples_count")), epoch_count)
        elif key == f"{self.kind}_stop" and self.open is not None:
            (start_ms, first, epoch_count), self.open = self.open, None
            seconds = (time_ms - start_ms) / 1000
            last = number(metadata.get("samples_count"))
            if first is not None and last is not None and last > first:
                samples, epochs = last - first, 0.0
            elif epoch_count:
                samples, epochs = math.nan, epoch_count
            else:
                warnings.add(f"{self.kind} at {_iso(start_ms)}: no samples_count on both ends nor epoch_count; "
                             "left out of the throughput")
                return
            if seconds <= 0:
                warnings.add(f"{where}: {self.kind}_stop is not after its {self.kind}_start; left out")
                return
            self.samples.append(samples)
            self.epochs.append(epochs)
            self.seconds.append(seconds)

    def counted(self, train_samples: Optional[float], warnings: CappedWarnings) -> tuple[array, array]:
        """(samples, seconds) of each block whose samples are known, in the log's order, as two columns."""
        samples_out, seconds_out = array("d"), array("d")
        for samples, epochs, seconds in zip(self.samples, self.epochs, self.seconds):
            if math.isnan(samples):
                if not train_samples:
                    warnings.add(f"a {self.kind} counts epochs but the log has no train_samples; left out of the "
                                 "throughput")
                    continue
                samples = epochs * train_samples
            samples_out.append(samples)
            seconds_out.append(seconds)
        return samples_out, seconds_out


@register("mllog", 1, "MLPerf :::MLLOG JSON lines (run_start/run_stop, block_start/block_stop samples_count)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    warnings = CappedWarnings()
    read_notes: list[str] = []
    blocks, epochs = _Intervals("block"), _Intervals("epoch")
    throughput, tracked = array("d"), 0  # tracked_stats after the warm-up ones, and how many there were
    start_ms = stop_ms = None
    stop_status = None
    last: dict = {}  # the last value of each key read below (eval_accuracy: the final one)
    eval_samples = None
    bad_times, first_bad = 0, ""
    events = 0
    for line_number, line in enumerate(read_lines(path, read_notes), 1):
        at = line.find(MARK)
        if at < 0:
            continue
        where = f"{path}:{line_number}"
        try:
            event = json.loads(line[at + len(MARK):])
        except ValueError as exc:  # JSONDecodeError, or an integer of more digits than Python converts
            warnings.add(f"{where}: not valid JSON after {MARK.strip()}: {clip(str(exc))}")
            continue
        except RecursionError:
            warnings.add(f"{where}: JSON after {MARK.strip()} nested deeper than Python parses; left out")
            continue
        key = event.get("key") if isinstance(event, dict) else None
        time_ms = number(event.get("time_ms")) if isinstance(event, dict) else None
        if not isinstance(key, str) or time_ms is None:
            warnings.add(f"{where}: an event needs a text key and a numeric time_ms; left out")
            continue
        if why := _bad_time(time_ms):
            bad_times += 1
            first_bad = first_bad or f"{where}: {clip(key, 40)} time_ms {time_ms:,.6g} {why}"
            continue
        events += 1
        metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        value = event.get("value")
        if key == "run_start" and start_ms is None:
            start_ms = time_ms
        elif key == "run_stop":
            stop_ms, stop_status = time_ms, metadata.get("status", "success")
        elif key in SUBMISSION:
            if value is None or isinstance(value, (str, int, float, bool)):
                last[key] = clip(value, 200) if isinstance(value, str) else value
            else:
                warnings.add(f"{where}: {key} is a {type(value).__name__}, not a text; left out")
        elif key in ("global_batch_size", "max_sequence_length", "train_samples", "eval_accuracy"):
            read = whole(value) if key != "eval_accuracy" else number(value)
            if read is None or (key != "eval_accuracy" and read <= 0):
                said = clip(repr(value), 60) if value is None or isinstance(value, (str, int, float)) else \
                    f"(a {type(value).__name__})"
                warnings.add(f"{where}: {key} {said} is not a "
                             + ("number" if key == "eval_accuracy" else "positive whole number") + "; left out")
            else:
                last[key] = read
                if key == "eval_accuracy":
                    eval_samples = whole(metadata.get("samples_count"))
        elif key == "tracked_stats":
            rate = number(value.get("throughput")) if isinstance(value, dict) else None
            if rate is not None:
                tracked += 1
                if tracked > skip_intervals:
                    throughput.append(rate)
        blocks.event(key, time_ms, metadata, warnings, where)
        epochs.event(key, time_ms, metadata, warnings, where)
    result = Imported(status="ok", metrics={"world_size": world_size},
                      details={k: last[k] for k in SUBMISSION if k in last})
    result.warnings = read_notes
    if bad_times:
        result.status = "failed"
        result.reason = (f"{first_bad}; such an event is no time stamp and was left out"
                         + (f" ({bad_times:,} events in all)" if bad_times > 1 else ""))
    if not events:
        result.status = "failed"
        result.reason = "; ".join(filter(None, [result.reason, f"no figure in the log: no {MARK.strip()} line"
                                                + (" with a valid time" if bad_times else "")]))
        result.warnings.extend(warnings.final())
        return result
    if start_ms is not None:
        result.started_at = _iso(start_ms)
    if stop_ms is not None:
        result.ended_at = _iso(stop_ms)
        if stop_status != "success":
            said = (repr(clip(stop_status, 60)) if isinstance(stop_status, str)
                    else f"of type {type(stop_status).__name__}")
            _fail(result, f"run_stop status {said}")
    else:
        _fail(result, "no run_stop event: the run did not end")
    m = result.metrics
    if start_ms is not None and stop_ms is not None:
        result.wall_time_s = m["time_to_train_s"] = (stop_ms - start_ms) / 1000
    if "global_batch_size" in last:
        m["samples_per_step"] = last["global_batch_size"]
    if "eval_accuracy" in last:
        m["eval_accuracy"] = last["eval_accuracy"]
        result.details["eval_samples_count"] = eval_samples
    train_samples = last.get("train_samples")
    samples, seconds = blocks.counted(train_samples, warnings)
    if not samples:
        samples, seconds = epochs.counted(train_samples, warnings)
    result.details.update(blocks=len(samples), tracked_stats=tracked, skipped=skip_intervals)
    if samples[skip_intervals:]:
        m["samples_per_s"] = math.fsum(samples[skip_intervals:]) / math.fsum(seconds[skip_intervals:])
        result.details["throughput_from"] = "blocks"
    elif throughput:
        m["samples_per_s"] = math.fsum(throughput) / len(throughput)
        result.details["throughput_from"] = "tracked_stats"
    else:
        warnings.add(f"no throughput: {len(samples)} block(s) with samples and {tracked} "
                     f"tracked_stats value(s), none after the {skip_intervals} warm-up one(s)")
    seq = last.get("max_sequence_length")
    if m.get("samples_per_s") is not None and seq:
        m["tokens_per_s_total"] = m["samples_per_s"] * seq
        m["tokens_per_s_per_device"] = m["samples_per_s"] * seq / world_size
    result.warnings.extend(warnings.final())
    return result


def _fail(result: Imported, why: str) -> None:
    result.status = "failed"
    result.reason = f"{result.reason}; {why}" if result.reason else why

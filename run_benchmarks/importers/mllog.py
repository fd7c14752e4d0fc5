"""MLPerf logging (version 1): ``:::MLLOG {json}`` lines from mlperf_logging.

Read: run_start / run_stop (time_ms; run_stop's metadata.status), global_batch_size,
max_sequence_length, tracked_stats (value.throughput in samples/s, per step), and the submission
fields (benchmark, org, platform). MLPerf's own figure is time to train (run_stop - run_start);
throughput is the mean of the tracked_stats after the first ``skip_intervals`` (warm-up).
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from . import Imported, read_lines, register

MARK = ":::MLLOG "


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, timezone.utc).isoformat(timespec="seconds")


@register("mllog", 1, "MLPerf :::MLLOG JSON lines (run_start/run_stop, tracked_stats throughput)")
def parse(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
    events: dict[str, dict] = {}
    throughput: list[float] = []
    warnings = []
    for number, line in enumerate(read_lines(path), 1):
        at = line.find(MARK)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(MARK):])
        except json.JSONDecodeError as exc:
            warnings.append(f"{path}:{number}: not valid JSON after {MARK.strip()}: {exc}")
            continue
        key = event.get("key")
        if key == "tracked_stats" and isinstance(event.get("value"), dict) and "throughput" in event["value"]:
            throughput.append(float(event["value"]["throughput"]))
        events.setdefault(key, event)
        if key == "run_stop":
            events[key] = event
    result = Imported(status="ok", metrics={"world_size": world_size}, warnings=warnings,
                      details={k: events[k].get("value") for k in ("submission_benchmark", "submission_org",
                                                                    "submission_platform", "submission_division")
                               if k in events})
    start, stop = events.get("run_start"), events.get("run_stop")
    if start:
        result.started_at = _iso(start["time_ms"])
    if stop:
        result.ended_at = _iso(stop["time_ms"])
        status = (stop.get("metadata") or {}).get("status", "success")
        if status != "success":
            result.status, result.reason = "failed", f"run_stop status {status!r}"
    else:
        result.status, result.reason = "failed", "no run_stop event: the run did not end"
    if start and stop:
        result.wall_time_s = (stop["time_ms"] - start["time_ms"]) / 1000
        result.details["time_to_train_s"] = result.wall_time_s
    batch = events.get("global_batch_size", {}).get("value")
    if batch is not None:
        result.metrics["samples_per_step"] = int(batch)
    measured = throughput[skip_intervals:]
    if measured:
        samples = math.fsum(measured) / len(measured)
        result.metrics["samples_per_s"] = samples
        seq = events.get("max_sequence_length", {}).get("value")
        if seq:
            result.metrics["tokens_per_s_total"] = samples * seq
            result.metrics["tokens_per_s_per_device"] = samples * seq / world_size
    elif result.status == "ok":
        result.status, result.reason = "failed", (f"{len(throughput)} tracked_stats throughput value(s), none "
                                                  f"after the {skip_intervals} warm-up one(s)")
    return result

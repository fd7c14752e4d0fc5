"""Stored attempts as JSON (every field) or CSV (the flat columns a spreadsheet wants)."""
from __future__ import annotations

import csv
import io
import json
from typing import Sequence

from ..store import CASE_COLUMNS, METRIC_COLUMNS, MONITOR_COLUMNS, Attempt

CSV_COLUMNS = ("run_id",) + CASE_COLUMNS + ("round", "attempt", "status", "reason", "precision", "started_at",
                                             "ended_at", "wall_time_s") + tuple(c for c, _, _ in METRIC_COLUMNS) + MONITOR_COLUMNS + (
    "accelbench_commit", "source", "results_path")


def to_json(attempts: Sequence[Attempt]) -> str:
    return json.dumps([a.row for a in attempts], indent=2, default=str) + "\n"


def to_csv(attempts: Sequence[Attempt]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for a in attempts:
        writer.writerow(["" if a.get(c) is None else a.get(c) for c in CSV_COLUMNS])
    return out.getvalue()

"""Stored results for a spreadsheet or another program: the raw attempts (JSON: every field; CSV: the flat
columns) and one summary row per workload (``report --format summary-csv|summary-json``), both with the
layout and batch facts as columns (report/facts.py) and the workload hash that groups them.

Paths are written relative to the checkout (``root``) so a file handed to someone else says which config
was used without naming the directories of the machine it ran on; a path outside the checkout keeps only
its file name (its SHA-256, ``extern_config_hash``, still identifies it).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from run_benchmarks.results.figures import contention
from run_benchmarks.results.store.schema import CASE_COLUMNS, METRIC_COLUMNS, MONITOR_COLUMNS, Attempt
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.facts import FACT_KEYS, round_facts
from run_benchmarks.results.report.summary import FIGURES, CaseSummary

PATH_FIELDS = ("extern_config", "results_path")
CSV_COLUMNS = ("run_id",) + CASE_COLUMNS + ("round", "attempt", "status", "reason", "precision", "started_at",
                                             "ended_at", "wall_time_s") + tuple(c for c, _, _ in METRIC_COLUMNS) + MONITOR_COLUMNS + (
    "accelbench_commit", "source", "results_path")
# Figures no store column holds, read from the metrics: MLPerf's own result in an imported MLPerf log
METRIC_CSV = ("time_to_train_s", "eval_accuracy", "eval_metrics", "mlperf_score_s")
FACT_CSV = ("workload_hash",) + tuple(k for k in FACT_KEYS if k != "precision")  # precision is a column already
# The verdict against the case's policy: compliant true/false (empty: not judged), each departing key=value
POLICY_CSV = ("compliant", "departures")
# How clean each round's measurement was (results/figures/contention.py, results/figures/noise.py): the verdict
# with its figures, and the rate's own 95 % interval, relative to the rate
CLEAN_CSV = ("contention", "contention_reasons", "others_cpu_share", "steal_share", "memory_pressure_share",
             "load_average", "rate_interval95_low", "rate_interval95_high")
CASE_FIELDS = ("case", "framework", "framework_version", "hardware", "vendor", "nnodes", "nprocs_per_node")
SUMMARY_COLUMNS = (CASE_FIELDS + ("config", "extern_config", "workload_hash") + FACT_KEYS
                   + ("rounds", "rounds_ok") + tuple(f"{f.key}{s}" for f in FIGURES for s in ("", "_cv"))
                   + ("flop_formula", "mfu_peak_tflops", "mfu_peak_source", "mfu_measured_peak_tflops")
                   + ("memory_bytes", "memory_definition")  # the memory figure the report's table shows
                   + ("scored_metrics",)  # an MLPerf import's metrics, each named: "FID 79.13; CLIP 0.1865"
                   + POLICY_CSV
                   + ("contention",))  # quiet, contended (n of k rounds), n/a: a contended row is not judged
# What each row's MFU divides by and how its FLOPs were counted (6N, 6N + attention, a PPO phase): MFU from
# two tools that count differently is never compared without these beside it.


def relative(path: Optional[str], root: Optional[Path]) -> Optional[str]:
    """``path`` relative to the checkout; a path outside it as its file name only."""
    if not path or root is None:
        return path
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        return str(p.resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return p.name


def _attempt_row(attempt: Attempt, root: Optional[Path]) -> dict:
    what = round_facts(attempt)
    row = {**attempt.row, **{k: relative(attempt.get(k), root) for k in PATH_FIELDS}}
    row["workload_hash"] = what.workload_hash
    row.update({k: (attempt.get("metrics") or {}).get(k) for k in METRIC_CSV})
    if isinstance(row.get("eval_metrics"), dict):  # every metric the rules score: {"FID": 79.1, "CLIP": 0.19}
        row["eval_metrics"] = json.dumps(row["eval_metrics"])
    row.update({k: what.facts.get(k) for k in FACT_KEYS if k != "precision"})
    row.update(compliance_marks.export_fields([attempt]))
    found = contention.of(attempt.get("monitor")) or {}
    row["contention"] = found.get("verdict")
    row["contention_reasons"] = "; ".join(found.get("reasons") or []) or None
    row.update({k: found.get(k) for k in CLEAN_CSV[2:6]})
    interval = ((attempt.get("metrics") or {}).get("rate_noise") or {}).get("interval95") or (None, None)
    row["rate_interval95_low"], row["rate_interval95_high"] = interval
    return row


def to_json(attempts: Sequence[Attempt], root: Optional[Path] = None) -> str:
    return json.dumps([_attempt_row(a, root) for a in attempts], indent=2, default=str) + "\n"


def _csv(columns: Sequence[str], rows: Sequence[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return out.getvalue()


def to_csv(attempts: Sequence[Attempt], root: Optional[Path] = None) -> str:
    return _csv(CSV_COLUMNS + METRIC_CSV + FACT_CSV + POLICY_CSV + CLEAN_CSV, [_attempt_row(a, root) for a in attempts])


def summary_row(summary: CaseSummary, root: Optional[Path] = None) -> dict[str, Any]:
    """One workload: its case, config, hash and facts, then each figure's mean and CV over ok rounds."""
    first = summary.attempts[0]
    row: dict[str, Any] = {k: first.get(k) for k in CASE_FIELDS}
    row["config"] = summary.config
    row["extern_config"] = relative(first.get("extern_config"), root)
    row["workload_hash"] = summary.workload_hash
    row.update({k: summary.facts.get(k) for k in FACT_KEYS})
    row["rounds"], row["rounds_ok"] = len(summary.attempts), len(summary.ok)
    for figure in FIGURES:
        stats = summary.figures.get(figure.key)
        row[figure.key] = stats.mean if stats else None
        row[f"{figure.key}_cv"] = stats.cv if stats and stats.n > 1 else None
    metrics = [a.get("metrics") or {} for a in summary.ok]

    def distinct(key):
        values = list(dict.fromkeys(m.get(key) for m in metrics if m.get(key) is not None))
        return values[0] if len(values) == 1 else "; ".join(map(str, values)) if values else None
    row["flop_formula"] = distinct("flop_formula")
    row["mfu_peak_tflops"] = distinct("peak_tflops")
    row["mfu_peak_source"] = "datasheet" if row["mfu_peak_tflops"] is not None else None
    row["mfu_measured_peak_tflops"] = distinct("measured_peak_tflops")
    chosen = summary.memory_figure
    row["memory_bytes"], row["memory_definition"] = (chosen.value, chosen.label) if chosen else (None, None)
    row["scored_metrics"] = summary.cell("eval_accuracy") if summary.scored else None
    row.update(compliance_marks.export_fields(summary.attempts))
    row["contention"] = summary.contention_cell()
    return row


def summary_json(summaries: Sequence[CaseSummary], root: Optional[Path] = None) -> str:
    return json.dumps([summary_row(s, root) for s in summaries], indent=2, default=str) + "\n"


def summary_csv(summaries: Sequence[CaseSummary], root: Optional[Path] = None) -> str:
    return _csv(SUMMARY_COLUMNS, [summary_row(s, root) for s in summaries])

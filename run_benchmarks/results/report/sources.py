"""What ``show`` adds for an imported round: the figures the log states beside accelbench's, each with its source.

An importer keeps, beside the headline figures, the ones the tool itself logged (its own TFLOP/s, MFU and
throughput, a whole-run figure next to an interval mean) and, for every figure, where it comes from:
``log: ...`` (the log states it), ``derived ...`` (arithmetic on the log's values), ``case ...`` (the named
case's formula or numbers), ``assumption: ...`` (a number the log does not state, taken from elsewhere).
Figures no store column holds (MLPerf's time to train and eval accuracy) are read from the metrics.
"""
from __future__ import annotations

from typing import Callable, Optional

from run_benchmarks.results.report.summary import number

# A tool's own figures kept beside the headline ones: metrics key -> (label, format)
LOGGED: dict[str, tuple[str, Callable[[float], str]]] = {
    "samples_per_s_logged": ("samples/s as logged", number),
    "samples_per_s_blocks": ("samples/s from the blocks", number),
    "samples_per_s_run": ("samples/s over the whole run, as logged", number),
    "samples_per_s_per_device": ("samples/s/device as logged", number),
    "effective_tokens_per_s_logged": ("effective tokens/s as logged", number),
    "tflops_per_device_logged": ("TFLOP/s/device as logged", lambda x: f"{x:.3g}"),
    "mfu_logged": ("MFU as logged", lambda x: f"{x:.1%}"),
    "loss_last_interval": ("loss of the last interval", lambda x: f"{x:.4f}"),
    "eval_target": ("eval target, as logged", lambda x: f"{x:.4g}"),
}
# figure keys as shown -> the metrics key its source is filed under (a statistic's column under its figure)
SOURCE_KEY = {"step_time_median_s": "step_time_s"}


def value(columns, key: str) -> Optional[float]:
    """A figure of a stored row: its column, else its metrics (a figure no column holds)."""
    found = columns.get(key)
    if found is None:
        found = (columns.get("metrics") or {}).get(key)
    return found if isinstance(found, (int, float)) and not isinstance(found, bool) else None


def source(metrics: Optional[dict], key: str) -> str:
    return ((metrics or {}).get("sources") or {}).get(SOURCE_KEY.get(key, key), "")


def logged_lines(metrics: Optional[dict]) -> list[str]:
    """``TFLOP/s/device as logged: 390 — log: throughput per GPU ...``: each figure the tool logged itself."""
    metrics = metrics or {}
    lines = []
    for key, (label, fmt) in LOGGED.items():
        found = metrics.get(key)
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            said = source(metrics, key)
            lines.append(f"{label}: {fmt(found)}" + (f" — {said}" if said else ""))
    if metrics.get("run_status") and metrics.get("eval_accuracy") is not None:
        lines.append(f"run status, as logged: {metrics['run_status']}")
    return lines + mlperf_lines(metrics)


def mlperf_lines(metrics: dict) -> list[str]:
    """An MLPerf import's scored metrics (each with the rules' goal), its compliance verdict, the folder's score."""
    lines, goals = [], metrics.get("eval_goals") or {}
    scored = metrics.get("eval_metrics") or {}
    if scored:
        lines.append("scored metrics: " + ", ".join(
            f"{name} {value:.4g}" + (f" (goal {goals[name]})" if name in goals else "") for name, value in
            scored.items() if isinstance(value, (int, float))) + (f" — {source(metrics, 'eval_metrics')}"
                                                                  if source(metrics, "eval_metrics") else ""))
    if metrics.get("mlperf_rules"):
        lines.append(f"MLPerf rules: {metrics['mlperf_rules']}")
    score = metrics.get("mlperf_score_s")
    if isinstance(score, (int, float)):
        lines.append(f"MLPerf score of the folder: {score / 60:,.2f} min"
                     + ("" if metrics.get("mlperf_score_counted") else " (this run not counted)")
                     + f" — {source(metrics, 'mlperf_score_s')}")
    if metrics.get("layout"):
        lines.append(f"layout: {metrics['layout']}")
    return lines

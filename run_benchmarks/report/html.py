"""One self-contained HTML file: tables, reference checks, inline SVG plots, the environment.

Rendered with a jinja2 template (autoescaped); plots come from report/svg.py, so the file opens
anywhere without network access or extra files.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Optional, Sequence

import jinja2

from .. import __version__
from ..analyze import CV_FLAG
from ..store import Attempt
from . import svg
from .summary import FIGURE_BY_KEY, CaseSummary

TABLE_FIGURES = ("tokens_per_s_per_device", "effective_tokens_per_s_per_device", "tokens_per_s_total",
                 "samples_per_s", "tflops_per_device", "mfu", "step_time_median_s", "init_time_s", "first_step_time_s", "wall_time_s", "loss_last",
                 "accel_util_mean", "power_w_mean", "energy_j", "tokens_per_joule")


def _fmt(figure: str, value: Optional[float]) -> str:
    return "n/a" if value is None else FIGURE_BY_KEY[figure].fmt(value)


def _label(s: CaseSummary) -> str:
    return f"{s.label} {s.config}" if s.config != "-" else s.label


def charts(summaries: Sequence[CaseSummary]) -> list[str]:
    out = []
    labels = [_label(s) for s in summaries]
    for figure in ("tokens_per_s_per_device", "mfu", "tflops_per_device"):
        values = [s.mean(figure) for s in summaries]
        if any(v is not None for v in values):
            out.append(svg.bar_chart(FIGURE_BY_KEY[figure].label, labels, values, FIGURE_BY_KEY[figure].fmt))
    mem = [s.figures["peak_memory_bytes"].max if "peak_memory_bytes" in s.figures else None for s in summaries]
    if any(v is not None for v in mem):
        totals = [s.figures["memory_total_bytes"].max if "memory_total_bytes" in s.figures else None
                  for s in summaries]
        out.append(svg.bar_chart("peak memory per device (grey: the device's total)", labels, mem,
                                 FIGURE_BY_KEY["peak_memory_bytes"].fmt, totals))
    steps = {}
    for s in summaries:
        for a in s.ok[:1]:
            series = (a.get("metrics") or {}).get("step_time_series") or []
            if series:
                steps[_label(s)] = [(x, y * 1e3) for x, y in series]
    if steps:
        out.append(svg.line_chart("step time over the run (slowest rank, first ok round)", steps, "step",
                                  "ms", lambda v: f"{v:.1f} ms"))
    out += _monitor_charts(summaries)
    out += _scaling(summaries, "samples_per_step", "throughput against global batch size", "batch size (samples)")
    out += _scaling(summaries, "world_size", "throughput against device count", "devices")
    return out


def _monitor_charts(summaries: Sequence[CaseSummary]) -> list[str]:
    """Utilisation and power of every device over the first ok round of each case (the monitors' samples)."""
    util, power = {}, {}
    for s in summaries:
        for a in s.ok[:1]:
            for node in (a.get("monitor") or {}).get("nodes", []):
                for d in node.get("devices", []):
                    name = f"{_label(s)} node {node.get('node_rank')} dev {d.get('index')}"
                    if d.get("util_series"):
                        util[name] = d["util_series"]
                    if d.get("power_series"):
                        power[name] = d["power_series"]
    out = []
    if util:
        out.append(svg.line_chart("accelerator utilisation over the round", util, "seconds", "%",
                                  lambda v: f"{v:.0f}%"))
    if power:
        out.append(svg.line_chart("power per device over the round", power, "seconds", "W", lambda v: f"{v:.0f} W"))
    return out


def _scaling(summaries: Sequence[CaseSummary], axis: str, title: str, x_label: str) -> list[str]:
    """A line per (case, framework, hardware) that was run at several values of ``axis``."""
    lines: dict[str, dict[float, float]] = {}
    for s in summaries:
        tok = s.mean("tokens_per_s_per_device")
        x = s.mean("samples_per_step") if axis == "samples_per_step" else s.key["nnodes"] * s.key["nprocs_per_node"]
        if tok is None or not x:
            continue
        name = f"{s.key['case']} {s.key['framework']} {s.key['hardware']}"
        lines.setdefault(name, {})[x] = tok
    series = {name: sorted(points.items()) for name, points in lines.items() if len(points) > 1}
    if not series:
        return []
    return [svg.line_chart(title, series, x_label, "tokens/s/device", FIGURE_BY_KEY["tokens_per_s_per_device"].fmt)]


def render(title: str, summaries: Sequence[CaseSummary], attempts: Sequence[Attempt], checks: Sequence = ()) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("run_benchmarks.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    formulas = sorted({(a.get("metrics") or {}).get("flop_formula") for s in summaries for a in s.ok} - {None})
    return env.get_template("report.html.j2").render(
        title=title, generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), version=__version__,
        cv_flag=f"{CV_FLAG:.0%}", summaries=summaries, figures=[FIGURE_BY_KEY[f] for f in TABLE_FIGURES],
        fmt=_fmt, formulas=formulas, checks=list(checks), charts=charts(summaries),
        attempts=[a.row for a in attempts],
        environment=lambda s: json.dumps(s.environment, indent=2, default=str, sort_keys=True))

"""The micro-benchmarks' pictures in the HTML report: bus bandwidth against message size per collective (as
nccl-tests users read it, log-scaled sizes) and GEMM TFLOP/s per size, one line per set of rounds."""
from __future__ import annotations

from typing import Sequence

from matplotlib import rc_context
from matplotlib.figure import Figure

from run_benchmarks.results.report.charts import STYLE, WIDTH_IN, _axes, _legend, colours, to_svg
from run_benchmarks.results.report.summary import CaseSummary, human_bytes
from run_benchmarks.results.report.task_figures import COLLECTIVES


def _series(summaries: Sequence[CaseSummary], name: str, x_of, split: str = "") -> dict[str, list]:
    """Per row with an ok round (and per value of the ``split`` parameter, e.g. a GEMM's dtype): (x, value)
    of every figure called ``name``, from its first ok round."""
    out: dict[str, list] = {}
    for s in summaries:
        for attempt in s.ok[:1]:
            for f in attempt.get("figures") or []:
                if f.get("name") == name and f.get("params"):
                    label = f"{s.label} ({attempt.get('world_size')} ranks)"
                    if split:
                        label += f" {f['params'].get(split)}"
                    out.setdefault(label, []).append((float(x_of(f["params"])), float(f["value"])))
    return {label: sorted(points) for label, points in out.items()}


def _draw(title: str, series: dict, x_label: str, y_label: str, chart_id: str, x_fmt) -> str:
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 3.4))
        ax = _axes(fig, title, x_label, y_label)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(lambda v, _pos: x_fmt(v))
        for (name, points), colour in zip(series.items(), colours(len(series))):
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3.5, linewidth=1.3,
                    color=colour, label=name)
        ax.set_ylim(bottom=0)
        _legend(ax, below=len(series) > 4)
        return to_svg(fig, title, chart_id)


def bandwidth_charts(summaries: Sequence[CaseSummary]) -> list[str]:
    charts = []
    for op in COLLECTIVES:
        series = _series(summaries, f"{op}.busbw_gbps", lambda p: p["bytes"])
        if series:
            charts.append(_draw(f"{op}: bus bandwidth against message size", series, "message size",
                                "busbw (GB/s)", f"busbw-{op}", lambda v: human_bytes(v)))
    gemm = _series(summaries, "gemm.tflops", lambda p: p["m"] * p["n"] * p["k"], split="dtype")
    if gemm:
        charts.append(_draw("GEMM: TFLOP/s against problem size (M·N·K)", gemm, "M·N·K", "TFLOP/s", "gemm",
                            lambda v: f"{v:.3g}"))
    return charts

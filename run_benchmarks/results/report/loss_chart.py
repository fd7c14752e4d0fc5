"""The loss-curve check drawn: a run's loss over the checked steps against its reference's band (checks/loss_check.py).

Apart from charts.py (the report's other charts), whose helpers it uses, so each stays short.
"""
from __future__ import annotations

import textwrap

from run_benchmarks.results.report import charts  # first: it chooses matplotlib's backend

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def loss_band(verdict, chart_id: str) -> str:
    """A run's loss over the checked steps against its reference's band (mean ± half-width), steps outside
    marked: loss_check.LossVerdict."""
    title = f"{verdict.label}: loss against the reference band"
    steps = list(verdict.steps)
    with rc_context(charts.STYLE):
        fig = Figure(figsize=(charts.WIDTH_IN, 3.2))
        ax = charts._axes(fig, "\n".join(textwrap.wrap(title, 80)), "step", "loss")
        xs = [c.step for c in steps]
        ax.fill_between(xs, [c.mean - c.half for c in steps], [c.mean + c.half for c in steps], color="#c6dbef",
                        label="reference band")
        ax.plot(xs, [c.mean for c in steps], color="#3182bd", linestyle="--", linewidth=1.0, label="reference mean")
        ax.plot(xs, [c.loss for c in steps], color="#252525", linewidth=1.3, marker="o", markersize=3, label="run")
        out = [c for c in steps if not c.inside]
        if out:
            ax.plot([c.step for c in out], [c.loss for c in out], "o", color="#de2d26", markersize=5,
                    label="outside")
        ax.set_ylim(auto=True)
        charts._legend(ax)
        return charts.to_svg(fig, title, chart_id)

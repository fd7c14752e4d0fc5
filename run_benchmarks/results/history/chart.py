"""One workload's chart over time (matplotlib as inline SVG, as report/charts.py draws the report's): each judged
point a marker whose tooltip (``<title>``) names its run id, date and figure; each segment's level a dashed line;
each change point a vertical line labelled with its size and interval; outliers in red. Every element the page's
readers (and the browser test) look for has an id: ``<chart>-point-<i>``, ``<chart>-changepoint-<i>``,
``<chart>-outlier-<i>``."""
from __future__ import annotations

import html
import re
import textwrap

from run_benchmarks.results.report import charts  # first: it chooses matplotlib's backend

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from run_benchmarks.results.history.analysis import Analysed  # noqa: E402
from run_benchmarks.results.history.text import LABEL  # noqa: E402
from run_benchmarks.results.report.summary import FIGURE_BY_KEY  # noqa: E402

POINT, LEVEL, CHANGE, OUTLIER = "#3366cc", "#7f7f7f", "#b00020", "#de2d26"


def history_chart(a: Analysed, chart_id: str) -> str:
    figure = a.workload.figure
    meta = FIGURE_BY_KEY[figure]
    pts = a.judged
    title = f"{a.workload.label}: {LABEL[figure]} per run"
    tips = {}
    with rc_context(charts.STYLE):
        fig = Figure(figsize=(charts.WIDTH_IN * 1.45, 3.4))
        ax = charts._axes(fig, "\n".join(textwrap.wrap(title, 110)), "when the run measured", meta.label)
        outliers = {o.index: o for o in a.found.outliers}
        xs = [p.at for p in pts]
        ax.plot(xs, [p.value(figure) for p in pts], color="#c6dbef", linewidth=1.0, zorder=1)
        for i, p in enumerate(pts):
            bad = i in outliers
            marker = ax.plot([p.at], [p.value(figure)], "o", color=OUTLIER if bad else POINT,
                             markersize=5 if bad else 4, zorder=3)[0]
            kind = "outlier" if bad else "point"
            marker.set_gid(f"{chart_id}-{kind}-{i}")
            tips[f"{chart_id}-{kind}-{i}"] = (f"run {p.run_id}, {p.date}: {meta.fmt(p.value(figure))}"
                                               + (f" ({'pending' if outliers[i].pending else 'outlier'} "
                                                  f"{outliers[i].off:+.1%})" if bad else ""))
        edges = [0] + [s.index for s in a.found.shifts] + [len(pts)]
        for n in range(len(edges) - 1):
            kept = [pts[i] for i in range(edges[n], edges[n + 1]) if i not in outliers]
            if kept:
                level = sum(p.value(figure) for p in kept) / len(kept)
                ax.plot([kept[0].at, kept[-1].at], [level, level], "--", color=LEVEL, linewidth=1.0, zorder=2)
        for n, shift in enumerate(a.found.shifts):
            at = pts[shift.index].at
            line = ax.axvline(at, color=CHANGE, linewidth=1.4, zorder=2)
            line.set_gid(f"{chart_id}-changepoint-{n}")
            interval = (f" [{shift.interval[0]:+.1%}, {shift.interval[1]:+.1%}]" if shift.interval else "")
            tips[f"{chart_id}-changepoint-{n}"] = (f"change point {shift.size:+.1%}{interval} "
                                                    f"({shift.verdict}) at run {pts[shift.index].run_id}")
            ax.annotate(f"{shift.size:+.1%}", (at, 1.0), xycoords=("data", "axes fraction"), color=CHANGE,
                        fontsize=8, ha="left", va="top", xytext=(3, 0), textcoords="offset points")
        ax.yaxis.set_major_formatter(charts._formatter(meta.fmt))
        fig.autofmt_xdate()
        return _titled(charts.to_svg(fig, title, chart_id), tips)


def _titled(svg: str, tips: dict[str, str]) -> str:
    """Each element's tooltip as the SVG ``<title>`` child of its group (matplotlib writes none)."""
    def add(match: re.Match) -> str:
        tip = tips.get(match.group(1))
        return match.group(0) + (f"<title>{html.escape(tip)}</title>" if tip else "")
    return re.sub(r'<g id="([^"]+)"[^>]*>', add, svg)

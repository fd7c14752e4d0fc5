"""The history as one self-contained HTML page (report/templates/history.html.j2, as report/html.py renders the
report): per workload its chart over time with the change points marked, the change points with what changed,
the outliers and what was left out, and a table of every point with its run id. Inline SVG only: no script, no
file and no network request."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Sequence

from run_benchmarks import __version__
from run_benchmarks.results.history import changes
from run_benchmarks.results.history.analysis import Analysed
from run_benchmarks.results.history.chart import history_chart
from run_benchmarks.results.history.series import FIGURES
from run_benchmarks.results.history.text import LABEL, cell, detail_lines, point_note, title
from run_benchmarks.results.report.html import _environment


def render(analysed: Sequence[Analysed], heading: str) -> str:
    sections = []
    for n, a in enumerate(analysed):
        keys = [k for k in FIGURES if any(p.value(k) is not None for p in a.points)]
        sections.append({
            "title": title(a), "id": f"workload{n}",
            "chart": history_chart(a, f"history{n}") if a.workload.figure and a.judged else "",
            "lines": detail_lines(a), "headers": [LABEL[k] for k in keys],
            "rows": [(p.date, p.run_id, [cell(p, k) for k in keys], point_note(a, p)) for p in a.points]})
    return _environment().get_template("history.html.j2").render(
        title=heading, generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), version=__version__,
        rules=changes.RULES, sections=sections)

"""The finetune table's HTML charts: one grouped bar chart per model, a Paddle and a Torch bar per row
(method x devices x batch, the devices named by kind), whiskers at ±1 std over the ok rounds, ``OOM`` written
where a side ran out of memory.
Imports matplotlib (through charts.py): only ``table --format html`` imports this module."""
from __future__ import annotations

from typing import Sequence

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from run_benchmarks.results.report import charts
from run_benchmarks.results.report.finetune_table import FIGURE, METHODS, TableRow, cell, device_noun, devices_text
from run_benchmarks.results.report.summary import FIGURE_BY_KEY

COLOURS = {"paddle": charts.colours(2)[0], "torch": charts.colours(2)[1]}
WIDTH = 0.38


def by_model(table: Sequence[TableRow]) -> list[str]:
    """Inline SVG charts, one per model, in the table's order."""
    models: dict[str, list[TableRow]] = {}
    for row in table:
        models.setdefault(row.model, []).append(row)
    return [_chart(model, rows, n) for n, (model, rows) in enumerate(models.items())]


def _chart(model: str, rows: list[TableRow], n: int) -> str:
    meta = FIGURE_BY_KEY[FIGURE]
    title = f"{model}: effective tokens/s/device, Paddle and Torch (mean of ok rounds, whiskers ±1 std)"
    stats = [s.figures[FIGURE] for r in rows for s in (r.paddle, r.torch) if s is not None and FIGURE in s.figures]
    top = max((st.mean + st.std for st in stats), default=1.0) or 1.0
    with rc_context(charts.STYLE):
        fig = Figure(figsize=(max(charts.WIDTH_IN, 1.3 * len(rows) + 2), 3.4))
        ax = fig.add_subplot()
        ax.set_title(title, loc="left")
        ax.set_ylabel("tokens/s/device (no padding)")
        ax.grid(True, axis="y", color=charts.GRID, linewidth=0.8)
        ax.set_axisbelow(True)
        for i, row in enumerate(rows):
            for side, offset in (("paddle", -WIDTH / 2), ("torch", WIDTH / 2)):
                summary = getattr(row, side)
                st = summary.figures.get(FIGURE) if summary is not None else None
                x = i + offset
                if st is None:  # no figure: say why where the bar would be
                    ax.text(x, top * 0.02, cell(summary), ha="center", va="bottom", rotation=90, fontsize=8,
                            color="#990000" if cell(summary) == "OOM" else "#555555")
                    continue
                bar = ax.bar(x, st.mean, WIDTH, color=COLOURS[side], label=side)[0]
                bar.set_gid(f"finetune{n}-{side}-{i}")
                if st.n > 1:
                    ax.errorbar(x, st.mean, yerr=st.std, fmt="none", ecolor="#333333", capsize=3, linewidth=1)
        noun = device_noun(rows)
        ax.set_xticks(range(len(rows)), [f"{METHODS[r.method]}\n{devices_text(r, noun)}, batch {r.batch or '-'}"
                                         for r in rows])
        ax.set_xlim(-0.6, len(rows) - 0.4)  # room for a side without a bar (its OOM word)
        ax.set_ylim(0, top * 1.15)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: meta.fmt(v) if v >= 0 else ""))
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        if unique:
            ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return charts.to_svg(fig, title, f"finetune{n}")

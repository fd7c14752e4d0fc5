"""A reference table's HTML charts: grouped bars, one chart per group of rows (the table's first label: the
model), and per row a published bar (light, hatched) and ours (solid) for each charted measure, in our units;
whiskers at ±1 std over our ok rounds; where a bar is missing the reason is written in its place (OOM, not
run). A twin's bars stand beside the published ones only to show the table fills: its x label says so.
Imports matplotlib (through report/charts.py): only ``table --format html`` imports this module."""
from __future__ import annotations

from matplotlib import rc_context
from matplotlib.figure import Figure

from run_benchmarks.results.report import charts
from run_benchmarks.results.tables.core import Built, Row
from run_benchmarks.results.tables.render import ours_text

WIDTH = 0.8


def by_group(built: Built) -> list[str]:
    """Inline SVG charts, one per group, in the table's order (none for a table with nothing to draw)."""
    groups: dict[str, list[Row]] = {}
    for row in built.rows:
        groups.setdefault(row.cell.labels[0] if row.cell.labels else built.table.name, []).append(row)
    return [_chart(built, name, rows, n) for n, (name, rows) in enumerate(groups.items())]


def _series(built: Built) -> list[tuple[str, str, bool]]:
    """(measure name, legend words, published?) of each bar of a row, in order."""
    out = []
    for m in built.table.measures:
        if not m.chart:
            continue
        if built.table.has_published:
            out.append((m.name, f"{m.heading}: published", True))
        out.append((m.name, f"{m.heading}: ours", False))
    return out


def _value(built: Built, row: Row, name: str, published: bool) -> tuple[float | None, float]:
    measure = next(m for m in built.table.measures if m.name == name)
    if published:
        choice = built.choice(row, measure)
        value = None if choice.figure is None else built.table.published_value(measure, choice.figure, row.cell)
        return value, 0.0
    summary = row.ours.get(name)
    stats = None if summary is None else built.table.ours_value(measure, summary)
    return (None, 0.0) if stats is None else (stats.mean, stats.std if stats.n > 1 else 0.0)


def _chart(built: Built, group: str, rows: list[Row], n: int) -> str:
    series = _series(built)
    colours = charts.colours(max(len(series), 1))
    width = WIDTH / max(len(series), 1)
    title = f"{built.table.name} {group}: published and ours (our units; whiskers ±1 std over our rounds)"
    values = [[_value(built, row, name, published) for name, _, published in series] for row in rows]
    top = max((v + s for line in values for v, s in line if v is not None), default=1.0) or 1.0
    with rc_context(charts.STYLE):
        fig = Figure(figsize=(max(charts.WIDTH_IN, 0.9 * len(rows) * max(len(series), 1) + 2), 3.6))
        ax = fig.add_subplot()
        ax.set_title(title, loc="left")
        ax.grid(True, axis="y", color=charts.GRID, linewidth=0.8)
        ax.set_axisbelow(True)
        for i, (row, line) in enumerate(zip(rows, values)):
            for j, ((name, legend, published), (value, std)) in enumerate(zip(series, line)):
                x = i - WIDTH / 2 + (j + 0.5) * width
                if value is None:
                    measure = next(m for m in built.table.measures if m.name == name)
                    why = "-" if published else ours_text(built, row, measure)
                    ax.text(x, top * 0.02, why[:24], ha="center", va="bottom", rotation=90, fontsize=7,
                            color="#990000" if why == "OOM" else "#555555")
                    continue
                bar = ax.bar(x, value, width, color=colours[j], label=legend, alpha=0.45 if published else 1.0,
                             hatch="//" if published else None, edgecolor=colours[j])[0]
                bar.set_gid(f"{built.table.name}{n}-{'published' if published else 'ours'}-{name}-{i}")
                if std:
                    ax.errorbar(x, value, yerr=std, fmt="none", ecolor="#333333", capsize=3, linewidth=1)
        ax.set_xticks(range(len(rows)), [_tick(built, row) for row in rows], fontsize=7)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylim(0, top * 1.15)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        if unique:
            ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return charts.to_svg(fig, title, f"{built.table.name}{n}")


def _tick(built: Built, row: Row) -> str:
    words = "\n".join(row.cell.labels[1:]) or row.cell.labels[0]
    if row.hardware:
        words += f"\n{row.hardware}" + (" (twin)" if built.twin(row) else "")
    return words

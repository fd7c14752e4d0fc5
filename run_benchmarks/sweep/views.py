"""Views of a sweep's rows, in the shapes the reference tables use, for the terminal (rich), Markdown and
HTML (self-contained: the charts are inline SVG; matplotlib is imported only to draw the HTML page's).

- ``points``: every row (grid points and max-batch attempts) with its status and why.
- ``pivot``: one axis across (e.g. batch or devices), the other axes down (model x strategy): tokens/s,
  step time, TFLOP/s and peak memory per cell, ``OOM`` / ``skipped`` where that is the answer (ColossalAI
  chat's table, the one for a slide); ``grid_chart`` draws it as grouped bars for the HTML page.
- ``versus``: axis value A against B per configuration, speedup % of B over A (PaddleNLP vs Torch).
- ``scaling``: throughput against the device count, efficiency against linear from the smallest count.
"""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.results.report import svg
from run_benchmarks.results.report.summary import human_bytes, number
from run_benchmarks.results.report.views import View
from run_benchmarks.sweep.state import Row


def cell(row: Optional[Row]) -> str:
    """A grid cell: what a slide shows of one point (tokens/s per device, step time, TFLOP/s per device, peak
    memory), or why there is no figure (OOM, skipped, failed, ...)."""
    if row is None:
        return "-"
    if row.status == "ok" and row.tokens_per_s_per_device is not None:
        mark = " ★max" if row.search == "largest" else ""
        parts = [f"{number(row.tokens_per_s_per_device)} tok/s",
                 row.step_time_s is not None and f"{number(row.step_time_s)} s",
                 row.tflops_per_device is not None and f"{number(row.tflops_per_device)} TFLOP/s",
                 row.peak_memory_bytes is not None and human_bytes(row.peak_memory_bytes)]
        return " · ".join(p for p in parts if p) + mark
    return {"oom": "OOM"}.get(row.status, row.status)


def _grid_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.search is None]


def _figure(value: Optional[float], fmt=number) -> str:
    return "" if value is None else fmt(value)


def points(rows: Sequence[Row], axes: Sequence[str]) -> View:
    """Every row, one column per axis and figure. A column empty in every row is left out (no max-batch
    search, nothing failed), and so is the micro batch when an axis already shows it."""
    names = list(dict.fromkeys([*axes, *(k for r in rows for k in r.labels)]))
    headers = ["point", *names, "status", "micro batch", "tok/s/dev", "step time (s)", "TFLOP/s/dev", "MFU",
               "peak mem", "max-batch", "why"]
    body = [[f"p{r.point:02d}", *(r.labels.get(a, "") for a in names), r.status,
             _figure(r.micro_batch_size, str), _figure(r.tokens_per_s_per_device), _figure(r.step_time_s),
             _figure(r.tflops_per_device), _figure(r.mfu, "{:.1%}".format), _figure(r.peak_memory_bytes, human_bytes),
             {"largest": "largest that fits", "tried": "tried"}.get(r.search or "", ""), r.reason[:160]]
            for r in rows]
    batch = headers.index("micro batch")
    shown_by_axis = any(all(row[i] == row[batch] for row in body) for i in range(1, 1 + len(names)))
    keep = [i for i, h in enumerate(headers)
            if (i < 1 + len(names) or any(row[i] for row in body)) and not (i == batch and shown_by_axis)]
    kinds = sorted({r.memory_kind for r in rows if r.peak_memory_bytes is not None and r.memory_kind})
    notes = [f"peak mem: per device, the figure report and show give each round ({', '.join(kinds)})"] if kinds else []
    return View("sweep points (warm-up excluded; per device: tokens/s, TFLOP/s, peak memory; step time: median)",
                [headers[i] for i in keep], [[row[i] for i in keep] for row in body], notes)


def _grid(rows: Sequence[Row], axes: Sequence[str], across: Optional[str]):
    """(down axes, across axis, column values, row keys, cell lookup) of the grid points, or None."""
    grid = _grid_rows(rows)
    axes = [a for a in axes if any(a in r.labels for r in grid)]
    if not grid or not axes:
        return None
    across = across if across in axes else axes[-1]
    down = [a for a in axes if a != across]
    columns = list(dict.fromkeys(r.labels.get(across, "") for r in grid))
    keys = list(dict.fromkeys(tuple(r.labels.get(a, "") for a in down) for r in grid))
    table = {(tuple(r.labels.get(a, "") for a in down), r.labels.get(across, "")): r for r in grid}
    return down, across, columns, keys, table


def pivot(rows: Sequence[Row], axes: Sequence[str], across: Optional[str] = None) -> Optional[View]:
    """The slide: the other axes down (model x strategy), one axis across (batch, devices), a cell per point."""
    shape = _grid(rows, axes, across)
    if shape is None:
        return None
    down, across, columns, keys, table = shape
    body = [[*key, *(cell(table.get((key, col))) for col in columns)] for key in keys]
    return View(f"{' x '.join(down) or 'point'} by {across}: tokens/s per device · step time · TFLOP/s per "
                "device · peak memory", [*down, *(f"{across}={c}" for c in columns)], body,
                ["OOM: out of memory; skipped: the plan refused the layout (see the points table for why); "
                 "step time: the median over the measured steps"])


def grid_chart(rows: Sequence[Row], axes: Sequence[str], across: Optional[str] = None) -> Optional[str]:
    """The grid as grouped bars (inline SVG, matplotlib: imported here, for an HTML page only): tokens/s per
    device per ``across`` value, one bar per row of the grid, OOM written where the bar would stand."""
    shape = _grid(rows, axes, across)
    if shape is None or not any(r.status == "ok" and r.tokens_per_s_per_device for r in shape[4].values()):
        return None
    from matplotlib import rc_context
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from run_benchmarks.results.report import charts  # the report's backend (Agg), style, colours and SVG output

    down, across, columns, keys, table = shape
    title = f"tokens/s per device: {' x '.join(down) or 'point'} by {across}"
    width = 0.8 / len(keys)
    with rc_context(charts.STYLE):
        fig = Figure(figsize=(charts.WIDTH_IN * 1.4, 3.6))
        ax = fig.add_subplot()
        ax.set_title(title, loc="left")
        ax.set_xlabel(across)
        ax.set_ylabel("tokens/s per device")
        ax.grid(True, axis="y", color=charts.GRID, linewidth=0.8)
        ax.set_axisbelow(True)
        for k, (key, colour) in enumerate(zip(keys, charts.colours(len(keys)))):
            xs = [c + (k - (len(keys) - 1) / 2) * width for c in range(len(columns))]
            points = [table.get((key, col)) for col in columns]
            heights = [p.tokens_per_s_per_device if p and p.status == "ok" and p.tokens_per_s_per_device else 0
                       for p in points]
            ax.bar(xs, heights, width * 0.95, color=colour, label=" ".join(key) or "all")
            for x, p in zip(xs, points):
                if p is not None and p.status != "ok":
                    ax.text(x, 0, "OOM" if p.status == "oom" else p.status, rotation=90, ha="center",
                            va="bottom", fontsize=7, color="#900" if p.status == "oom" else "#666")
        ax.set_xticks(range(len(columns)), columns)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number(v) if v >= 0 else ""))
        ax.legend(title=" x ".join(down) or None, fontsize=7, frameon=False, loc="upper left",
                  bbox_to_anchor=(1.0, 1.0))
        return charts.to_svg(fig, title, "sweep-grid")


def versus(rows: Sequence[Row], axis: str, a: str, b: str) -> Optional[View]:
    grid = [r for r in _grid_rows(rows) if axis in r.labels]
    others = list(dict.fromkeys(k for r in grid for k in r.labels if k != axis))
    by_key: dict[tuple, dict[str, Row]] = {}
    for r in grid:
        by_key.setdefault(tuple(r.labels.get(k, "") for k in others), {})[r.labels[axis]] = r
    body = []
    for key, pair in by_key.items():
        ra, rb = pair.get(a), pair.get(b)
        if ra is None and rb is None:
            continue
        speedup = ""
        if ra and rb and ra.tokens_per_s_per_device and rb.tokens_per_s_per_device:
            speedup = f"{(rb.tokens_per_s_per_device / ra.tokens_per_s_per_device - 1) * 100:+.1f}%"
        body.append([*key, cell(ra), cell(rb), speedup])
    if not body:
        return None
    return View(f"{axis}: {a} vs {b} per configuration", [*others, a, b, f"speedup of {b}"], body,
                [f"speedup = tokens/s per device of {b} / of {a} - 1"])


def scaling(rows: Sequence[Row], axis: str, mode: str = "strong") -> Optional[View]:
    """Throughput (all devices) per device count; efficiency = (T_n / T_1) / (n / n_1) from the smallest
    count n_1 of the same configuration: 100% is linear. Strong or weak is how the sweep set the batch
    (strong: the same global batch spread over more devices; weak: the same batch per device)."""
    grid = [r for r in _grid_rows(rows) if axis in r.labels]
    others = list(dict.fromkeys(k for r in grid for k in r.labels if k != axis))
    groups: dict[tuple, list[Row]] = {}
    for r in grid:
        groups.setdefault(tuple(r.labels.get(k, "") for k in others), []).append(r)
    body = []
    for key, members in groups.items():
        ok = sorted((r for r in members if r.status == "ok" and r.tokens_per_s_total and r.world_size),
                    key=lambda r: r.world_size)
        base = ok[0] if ok else None
        for r in sorted(members, key=lambda r: r.world_size or 0):
            eff = ""
            if r is base:
                eff = f"base ({base.world_size} device(s))"
            elif base is not None and r in ok:
                eff = f"{(r.tokens_per_s_total / base.tokens_per_s_total) / (r.world_size / base.world_size):.0%}"
            body.append([*key, str(r.world_size or "-"), cell(r),
                         number(r.tokens_per_s_total) if r.status == "ok" and r.tokens_per_s_total else "",
                         eff])
    if not body:
        return None
    return View(f"{mode} scaling over {axis}", [*others, "devices", "per device", "tok/s total",
                                                 "efficiency vs linear"], body,
                [f"{mode} scaling; efficiency = (tok/s total at n / at the fewest devices) / (n / fewest)"])


def scaling_chart(rows: Sequence[Row], axis: str) -> Optional[str]:
    """Throughput against devices per configuration, with its linear line (inline SVG), or None."""
    grid = [r for r in _grid_rows(rows) if axis in r.labels and r.status == "ok" and r.tokens_per_s_total]
    if len({r.world_size for r in grid}) < 2:
        return None
    groups: dict[str, list[Row]] = {}
    for r in grid:
        groups.setdefault(" ".join(v for k, v in r.labels.items() if k != axis) or "all", []).append(r)
    series: dict[str, list[tuple[float, float]]] = {}
    for label, members in groups.items():
        members.sort(key=lambda r: r.world_size)
        first = members[0]
        series[label] = [(r.world_size, r.tokens_per_s_total) for r in members]
        series[f"{label} (linear)"] = [(r.world_size, first.tokens_per_s_total * r.world_size / first.world_size)
                                       for r in members]
    return svg.line_chart("throughput against devices", series, "devices", "tokens/s (all devices)", number)

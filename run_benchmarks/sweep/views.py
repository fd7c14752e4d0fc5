"""Views of a sweep's rows, in the shapes the reference tables use, for the terminal (rich), Markdown and
HTML (self-contained: the chart is inline SVG).

- ``points``: every row (grid points and max-batch attempts) with its status and why.
- ``pivot``: one axis across (e.g. devices), the other axes down (model x strategy): throughput and peak
  memory per cell, ``OOM`` / ``skipped`` where that is the answer (ColossalAI chat's table).
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
    if row is None:
        return "-"
    if row.status == "ok" and row.tokens_per_s_per_device is not None:
        mark = " ★max" if row.search == "largest" else ""
        return f"{number(row.tokens_per_s_per_device)} tok/s · {human_bytes(row.peak_memory_bytes)}{mark}"
    return {"oom": "OOM"}.get(row.status, row.status)


def _grid_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.search is None]


def points(rows: Sequence[Row], axes: Sequence[str]) -> View:
    names = list(dict.fromkeys([*axes, *(k for r in rows for k in r.labels)]))
    body = [[f"p{r.point:02d}", *(r.labels.get(a, "") for a in names), r.status,
             "" if r.micro_batch_size is None else str(r.micro_batch_size),
             number(r.tokens_per_s_per_device) if r.tokens_per_s_per_device is not None else "",
             human_bytes(r.peak_memory_bytes) if r.peak_memory_bytes is not None else "",
             {"largest": "largest that fits", "tried": "tried"}.get(r.search or "", ""), r.reason[:160]]
            for r in rows]
    return View("sweep points (tokens/s per device, warm-up excluded; peak memory per device)",
                ["point", *names, "status", "micro batch", "tok/s/dev", "peak mem", "max-batch", "why"], body, [])


def pivot(rows: Sequence[Row], axes: Sequence[str], across: Optional[str] = None) -> Optional[View]:
    grid = _grid_rows(rows)
    axes = [a for a in axes if any(a in r.labels for r in grid)]
    if not grid or not axes:
        return None
    across = across if across in axes else axes[-1]
    down = [a for a in axes if a != across]
    columns = list(dict.fromkeys(r.labels.get(across, "") for r in grid))
    keys = list(dict.fromkeys(tuple(r.labels.get(a, "") for a in down) for r in grid))
    table = {(tuple(r.labels.get(a, "") for a in down), r.labels.get(across, "")): r for r in grid}
    body = [[*key, *(cell(table.get((key, col))) for col in columns)] for key in keys]
    return View(f"{' x '.join(down) or 'point'} by {across}: tokens/s per device · peak memory",
                [*down, *(f"{across}={c}" for c in columns)], body,
                ["OOM: out of memory; skipped: the plan refused the layout (see the points table for why)"])


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

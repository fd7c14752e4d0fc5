"""Small inline SVG charts for the HTML report: no plotting library, no image files, no network.

Lines for a figure against device count (a sweep's scaling table); the report's other charts are charts.py's.
Text goes through ``html.escape``; numbers are laid out on a plain linear scale from zero.
"""
from __future__ import annotations

import html
from typing import Callable, Sequence

WIDTH = 760
COLORS = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00")


def _text(x: float, y: float, s: str, anchor: str = "start", size: int = 12, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-family="sans-serif"{extra}>{html.escape(s)}</text>')


def line_chart(title: str, series: dict[str, Sequence[tuple[float, float]]], x_label: str, y_label: str,
               fmt: Callable[[float], str]) -> str:
    """One polyline per series; axes from zero to the largest value."""
    height, left, right, top_pad, bottom = 300, 70, 20, 30, 50
    points = [p for s in series.values() for p in s]
    x_max = max([p[0] for p in points] + [1e-12])
    y_max = max([p[1] for p in points] + [1e-12])
    plot_w, plot_h = WIDTH - left - right, height - top_pad - bottom

    def xy(x: float, y: float) -> tuple[float, float]:
        return left + plot_w * x / x_max, top_pad + plot_h * (1 - y / y_max)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" '
             f'height="{height + 18 * len(series)}" role="img" aria-label="{html.escape(title)}">',
             _text(8, 18, title, size=14, extra=' font-weight="bold"'),
             f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{left + plot_w}" y2="{top_pad + plot_h}" stroke="#444"/>',
             f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" stroke="#444"/>',
             _text(left - 4, top_pad + 4, fmt(y_max), anchor="end", size=10),
             _text(left - 4, top_pad + plot_h, "0", anchor="end", size=10),
             _text(left + plot_w, top_pad + plot_h + 14, f"{x_max:g}", anchor="end", size=10),
             _text(left + plot_w / 2, top_pad + plot_h + 30, x_label, anchor="middle"),
             _text(12, top_pad + plot_h / 2, y_label, extra=f' transform="rotate(-90 12 {top_pad + plot_h / 2:.0f})"')]
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in (xy(x, y) for x, y in pts))
        parts.append(f'<polyline class="series" points="{coords}" fill="none" stroke="{color}" stroke-width="1.5">'
                     f'<title>{html.escape(name)}</title></polyline>')
        if len(pts) < 20:
            parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in
                      (xy(x, y) for x, y in pts)]
        y = height + 18 * i + 4
        parts.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{color}"/>')
        parts.append(_text(left + 18, y, name))
    parts.append("</svg>")
    return "".join(parts)

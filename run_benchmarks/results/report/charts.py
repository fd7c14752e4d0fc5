"""The HTML report's charts: matplotlib figures rendered to inline SVG strings.

Why matplotlib: hand-drawn SVG had no ticks, no grid and no error bars, and readers could not judge the
numbers. Everything here renders with the Agg/SVG backends (no display, no pyplot state), text stays text
(``svg.fonttype: none``: small, searchable, drawn in the reader's sans-serif font) and nothing refers to a
file or the network, so the HTML page stays one self-contained file. Each chart's ids are salted with its
own name so several charts on one page never share a clip path or marker id.

Charts: one bar chart per model (tokens/s/device, bars coloured by framework on hardware, ±1 std over
rounds), peak memory, step time over the run, monitor series, throughput and scaling efficiency against
device count, MFU against global batch size, loss curves.
"""
from __future__ import annotations

import html
import io
import math
from typing import Callable, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib import colormaps, rc_context  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: E402

from run_benchmarks.results.report import chart_data as data  # noqa: E402
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary  # noqa: E402

GRID = "#d9d9d9"
WIDTH_IN = 6.8  # about 650 px: two charts side by side on a 1400 px page
STYLE = {"svg.fonttype": "none", "font.family": "sans-serif", "font.size": 9, "axes.titlesize": 10,
         "axes.titleweight": "bold", "axes.spines.top": False, "axes.spines.right": False}
_NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}


def colours(n: int) -> list[str]:
    """``n`` distinct colours from tab20: its ten strong hues first, then their light partners (20 before
    any repeats)."""
    table = colormaps["tab20"].colors
    order = [table[i] for i in range(0, 20, 2)] + [table[i] for i in range(1, 20, 2)]
    return [matplotlib.colors.to_hex(order[i % 20]) for i in range(n)]


class Palette:
    """One colour per key for the whole page, handed out in first-seen order."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def __call__(self, key: str) -> str:
        if key not in self.keys:
            self.keys[key] = colours(len(self.keys) + 1)[-1]
        return self.keys[key]


def to_svg(fig: Figure, title: str, chart_id: str) -> str:
    """The figure as an ``<svg>`` element for inlining: no XML prolog, ``class="chart"`` and the title as
    its accessible name."""
    out = io.StringIO()
    with rc_context({"svg.hashsalt": chart_id}):
        fig.savefig(out, format="svg", bbox_inches="tight", metadata=_NO_METADATA)
    text = out.getvalue()
    text = text[text.index("<svg"):]
    return text.replace("<svg ", f'<svg class="chart" id="{html.escape(chart_id)}" role="img" '
                                  f'aria-label="{html.escape(title)}" ', 1)


def _axes(fig: Figure, title: str, x_label: str, y_label: str, ax=None):
    ax = ax or fig.add_subplot()
    ax.set_title(title, loc="left")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, color=GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    return ax


def _formatter(fmt: Callable[[float], str]) -> FuncFormatter:
    return FuncFormatter(lambda v, _pos: fmt(v) if v >= 0 else "")


def _legend(ax, below: bool = False) -> None:
    """Beside the plot, or under it in two columns when the entries are many (a tall legend would be cut)."""
    if not ax.get_legend_handles_labels()[0]:
        return
    if below:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False, fontsize=8)
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)


def model_bars(summaries: Sequence[CaseSummary], palette: Palette, figure: str = "tokens_per_s_per_device",
               prefix: str = "bars", key_of: Callable[[CaseSummary], str] = data.colour_key,
               names: Optional[dict[int, str]] = None) -> list[str]:
    """One horizontal bar chart per model: one bar per row, coloured by ``key_of`` (framework on hardware;
    a compare adds its side, and ``names`` its row labels), whiskers at ±1 standard deviation over the ok
    rounds, the mean (± CV) written at the bar's end. Per model, so one large model's bars never flatten a
    small one's."""
    meta = FIGURE_BY_KEY[figure]
    out = []
    for n, (case, rows) in enumerate(data.by_case(summaries).items()):
        rows = [s for s in rows if s.mean(figure) is not None]
        if not rows:
            continue
        varying = data.label_facts(rows)
        with rc_context(STYLE):
            fig = Figure(figsize=(WIDTH_IN, 0.9 + 0.42 * len(rows) + 0.25 * len({key_of(s) for s in rows})))
            title = f"{case}: {meta.label} (mean of ok rounds, whiskers ±1 std)"
            ax = _axes(fig, title, meta.label, "")
            top = max(s.figures[figure].mean + s.figures[figure].std for s in rows)
            seen: set[str] = set()
            for i, s in enumerate(rows):
                stats, key = s.figures[figure], key_of(s)
                bar = ax.barh(i, stats.mean, color=palette(key), height=0.65,
                              label=None if key in seen else key)[0]
                seen.add(key)
                bar.set_gid(f"{prefix}{n}-bar-{i}")
                if stats.n > 1:
                    whisker = ax.errorbar(stats.mean, i, xerr=stats.std, fmt="none", ecolor="#333333",
                                          capsize=3, linewidth=1)
                    for line in whisker.lines[2]:
                        line.set_gid(f"{prefix}{n}-err-{i}")
                ax.text(stats.mean + stats.std + top * 0.01, i, s.cell(figure), va="center", fontsize=8)
            ax.set_yticks(range(len(rows)), [(names or {}).get(id(s)) or data.row_label(s, varying) for s in rows])
            ax.invert_yaxis()
            ax.set_xlim(0, top * 1.3)
            ax.xaxis.set_major_formatter(_formatter(meta.fmt))
            ax.grid(False, axis="y")
            _legend(ax)
            out.append(to_svg(fig, title, f"{prefix}{n}"))
    return out


def memory_bars(summaries: Sequence[CaseSummary], palette: Palette) -> list[str]:
    """Memory per device of every row in the definition its table row shows (device in use, reserved, the
    worker's peak: results/figures/memory.py), named on the row's label, with the device's total drawn light
    behind it."""
    rows = [s for s in summaries if s.memory_figure is not None]
    if not rows:
        return []
    fmt = FIGURE_BY_KEY["peak_memory_bytes"].fmt
    peak = max(s.memory_figure.value for s in rows)
    totals = [s.figures["memory_total_bytes"].max for s in rows if "memory_total_bytes" in s.figures]
    # A total far above every peak (a CPU run's host memory) would flatten the bars to slivers: named, not drawn.
    draw_totals = bool(totals) and peak >= 0.05 * max(totals)
    extent = max([peak] + (totals if draw_totals else []))
    title = "memory per device" + (" (light: the device's total)" if draw_totals else
                                        f" (device total {fmt(max(totals))} not drawn)" if totals else "")
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 0.9 + 0.42 * len(rows)))
        ax = _axes(fig, title, "bytes", "")
        for i, s in enumerate(rows):
            total = s.figures.get("memory_total_bytes")
            if total and draw_totals:
                ax.barh(i, total.max, color="#eeeeee", height=0.8)
            ax.barh(i, s.memory_figure.value, color=palette(data.colour_key(s)), height=0.55)
        ax.set_yticks(range(len(rows)), [f"{data.row_label(s, data.label_facts(rows), with_case=True)} "
                                         f"({s.memory_figure.name})" for s in rows])
        ax.invert_yaxis()
        ax.xaxis.set_major_formatter(_formatter(fmt))
        ax.xaxis.set_major_locator(MultipleLocator(2 ** math.ceil(math.log2(max(extent, 5) / 5))))  # 64 MiB, 1 GiB
        ax.grid(False, axis="y")
        return [to_svg(fig, title, "memory")]


def lines(title: str, series: dict[str, Sequence[tuple[float, float]]], x_label: str, y_label: str,
          chart_id: str, colour: Optional[Callable[[str], str]] = None, markers: bool = False) -> str:
    """One line per series, x and y from zero unless the data says otherwise."""
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 3.2))
        ax = _axes(fig, title, x_label, y_label)
        fallback = colours(len(series))
        for i, (name, pts) in enumerate(series.items()):
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            line, = ax.plot(xs, ys, color=colour(name) if colour else fallback[i], linewidth=1.3,
                            marker="o" if markers or len(pts) < 20 else None, markersize=3.5, label=name)
            line.set_gid(f"{chart_id}-series-{i}")
        _legend(ax, below=len(series) > 6)
        return to_svg(fig, title, chart_id)


_SCALES_WITH_DEVICES = ("data_parallel", "sharding_degree", "global_batch_samples", "global_batch_tokens",
                        "micro_batch_size")
_SETS_THE_BATCH = ("micro_batch_size", "gradient_accumulation_steps", "global_batch_samples", "global_batch_tokens")


def scaling(summaries: Sequence[CaseSummary], palette: Palette) -> list[str]:
    """Total tokens/s (±1 std) and scaling efficiency against device count, one line per model, framework
    and hardware at one micro batch (where rows store it): efficiency is tokens/s/device at n devices over
    tokens/s/device at the line's fewest devices."""
    lines_: dict[str, dict[int, CaseSummary]] = {}
    # what else tells rows apart (precision, train.steps) names a line of its own, never a point overwritten
    other = [k for k in data.varying_facts(summaries) if k not in _SCALES_WITH_DEVICES]
    for s in summaries:
        if s.mean("tokens_per_s_total") is None:
            continue
        micro = getattr(s, "facts", {}).get("micro_batch_size")
        batch = f", micro batch {micro}" if micro else ""
        name = f"{s.key['case']} {data.colour_key(s)}{batch}" + (f" ({data.fact_words(s, other)})" if other else "")
        lines_.setdefault(name, {})[data.devices(s)] = s
    lines_ = {k: dict(sorted(v.items())) for k, v in lines_.items() if len(v) > 1}
    if not lines_:
        return []
    title = "throughput against device count"
    styles = colours(len(lines_))
    with rc_context(STYLE):
        fig = Figure(figsize=(2 * WIDTH_IN, 3.4), layout="constrained")
        left, right = fig.subplots(1, 2)
        _axes(fig, title + " (tokens/s, all devices; whiskers ±1 std)", "devices", "tokens/s total", left)
        _axes(fig, "scaling efficiency (tokens/s/device against the fewest devices)", "devices", "efficiency", right)
        for i, (name, points) in enumerate(lines_.items()):
            xs = list(points)
            totals = [points[x].figures["tokens_per_s_total"] for x in xs]
            bar = left.errorbar(xs, [t.mean for t in totals], yerr=[t.std for t in totals], color=styles[i],
                                marker="o", capsize=3, label=name)
            bar.lines[0].set_gid(f"scaling-series-{i}")
            base = points[xs[0]].mean("tokens_per_s_per_device")
            right.plot(xs, [points[x].mean("tokens_per_s_per_device") / base for x in xs], color=styles[i],
                       marker="o")
        ticks = sorted({x for p in lines_.values() for x in p})
        for ax in (left, right):
            ax.set_xticks(ticks, [str(t) for t in ticks])
        right.axhline(1.0, color="#888888", linestyle="--", linewidth=0.8)
        right.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}"))
        left.yaxis.set_major_formatter(_formatter(FIGURE_BY_KEY["tokens_per_s_total"].fmt))
        left.set_ylim(bottom=0)
        right.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2, frameon=False, fontsize=8)
        return [to_svg(fig, title, "scaling")]


def mfu_against_batch(summaries: Sequence[CaseSummary]) -> list[str]:
    """MFU (±1 std) against global batch size in samples, one line per model, framework, hardware and
    device count; tokens/s/device where no row has an MFU (no peak declared for the accelerator)."""
    figure = "mfu" if any(s.mean("mfu") is not None for s in summaries) else "tokens_per_s_per_device"
    meta = FIGURE_BY_KEY[figure]
    groups: dict[str, list[CaseSummary]] = {}
    other = [k for k in data.varying_facts(summaries) if k not in _SETS_THE_BATCH]  # a line each, never merged
    for s in summaries:
        if s.mean(figure) is not None and s.mean("samples_per_step"):
            name = f"{s.key['case']} {data.colour_key(s)} {data.devices(s)} dev"
            groups.setdefault(name + (f" ({data.fact_words(s, other)})" if other else ""), []).append(s)
    if not groups:
        return []
    title = f"{meta.label} against global batch size" + ("" if figure == "mfu" else " (no MFU: no peak declared)")
    styles = colours(len(groups))
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 3.4))
        ax = _axes(fig, title, "global batch (samples per step)", meta.label)
        for i, (name, rows) in enumerate(groups.items()):
            rows.sort(key=lambda r: r.mean("samples_per_step"))
            stats = [r.figures[figure] for r in rows]
            bar = ax.errorbar([r.mean("samples_per_step") for r in rows], [st.mean for st in stats],
                              yerr=[st.std for st in stats], color=styles[i], marker="o", capsize=3, label=name)
            bar.lines[0].set_gid(f"mfu-series-{i}")
        batches = sorted({r.mean("samples_per_step") for rows in groups.values() for r in rows})
        if batches[-1] >= 4 * batches[0]:
            ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [f"{b:g}" for b in batches])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(_formatter(meta.fmt))
        _legend(ax)
        return [to_svg(fig, title, "mfu")]


def loss_curves(summaries: Sequence[CaseSummary], palette: Palette, prefix: str = "loss",
                names: Optional[dict[int, str]] = None) -> list[str]:
    """Per model, the loss of each row's first ok round over its steps: do the runs train the same model
    the same way? ``names`` overrides a row's legend text (a compare's ``A``/``B``)."""
    out = []
    for n, (case, rows) in enumerate(data.by_case(summaries).items()):
        varying, series = data.label_facts(rows), {}
        for s in rows:
            points = data.loss_series(s)
            if points:
                label = (names or {}).get(id(s)) or data.row_label(s, varying, width=60)
                series[label] = points
        if series:
            out.append(lines(f"{case}: training loss (first ok round, warm-up included)", series, "step", "loss",
                             f"{prefix}{n}"))
    return out


"""The history as text: the terminal's compact table per workload (one row per figure, its sparkline over the
points, first, newest and the change between them), the Markdown page (a row per point), and the lines both
share: each change point with its size, interval, date, sides and what changed; outliers; what was left out."""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.results.history import changes
from run_benchmarks.results.history.analysis import Analysed, shift_words
from run_benchmarks.results.history.explain import short
from run_benchmarks.results.history.series import FIGURES, Point
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, human_bytes

BARS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 60  # the newest this many points in a sparkline; the table says how many it leaves out
LABEL = {"memory": "memory/device", **{k: f.label for k, f in FIGURE_BY_KEY.items()}}


def cell(point: Point, key: str) -> str:
    value = point.value(key)
    if value is None:
        return "n/a"
    if key == "memory":
        return f"{human_bytes(value)} ({point.summary.memory_kind})"
    return FIGURE_BY_KEY[key].fmt(value)


def sparkline(values: Sequence[Optional[float]]) -> str:
    """One bar per value between the smallest and the largest; a gap (no figure) is a space."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    return "".join(" " if v is None else BARS[0 if span <= 0 else min(7, int((v - low) / span * 8))] for v in values)


def figure_rows(a: Analysed) -> list[list[str]]:
    """[figure, sparkline, first, newest, newest/first - 1] per figure some point has."""
    rows = []
    for key in FIGURES:
        shown = [p for p in a.points if p.value(key) is not None]
        if not shown:
            continue
        first, newest = shown[0], shown[-1]
        change = newest.value(key) / first.value(key) - 1 if first.value(key) else None
        spark = sparkline([p.value(key) for p in a.points[-SPARK_POINTS:]])
        rows.append([LABEL[key], spark, cell(first, key), cell(newest, key),
                     "n/a" if change is None or len(shown) < 2 else f"{change:+.1%}"])
    return rows


def title(a: Analysed) -> str:
    w = a.workload
    window = f"{a.points[0].date} .. {a.points[-1].date}" if a.points else "no point"
    mark = f" [{compliance_marks.NON_COMPLIANT}]" if w.non_compliant and not w.mixed_compliance else ""
    return f"{w.label}{mark}: workload {w.id}, {len(a.points)} run(s), {window}"


def detail_lines(a: Analysed) -> list[str]:
    """What the table cannot say: the change points with what changed, outliers, left out, compliance, rules."""
    out = []
    pts = a.judged
    for shift, why in zip(a.found.shifts, a.explained):
        out.append(f"change point ({shift.verdict or 'no interval'}): {shift_words(a, shift)}")
        here = "; ".join(c.words() for c in why.here) or "nothing stored differs"
        out.append(f"  changed here: {here}")
        if why.earlier:
            out.append("  also changed earlier without effect: " + "; ".join(
                f"{c.words()} (run {c.run_id}, {c.date})" for c in why.earlier))
    for o in a.found.outliers:
        p = pts[o.index]
        kind = ("pending: the newest point(s) off the level, not yet a shift (one needs "
                f"{changes.MIN_SHIFT} points)" if o.pending else "outlier: a single bad point, not a change")
        out.append(f"{kind}: run {p.run_id} {p.date} {o.off:+.1%} from the level around it ({o.sigmas:.0f} sigma)")
    for p in a.points:
        for line in p.contended:
            out.append(f"left out, contended: run {p.run_id} {p.date} {line}")
        if p.summary is None and not p.contended:
            out.append(f"left out, no ok round: run {p.run_id} {p.date}: {'; '.join(p.failed)}")
    if a.workload.mixed_compliance:
        out.append(f"{compliance_marks.NON_COMPLIANT} points sit beside compliant ones in this series (marked): "
                   "their figures come from another workload than the case's policy allows")
    if a.found.sigma is not None:
        out.append(f"noise {a.found.sigma:.2%} per point ({a.found.sigma_source}); "
                   f"significance threshold {a.found.threshold:.1f} sigma^2")
    out.append(a.line())
    return out


def print_terminal(console, analysed: Sequence[Analysed], heading: str) -> None:
    from rich.table import Table
    from rich.text import Text

    from run_benchmarks.results.report.terminal import print_table

    console.print(heading, markup=False, highlight=False, soft_wrap=True)
    for a in analysed:
        console.print(title(a), style="bold", markup=False, highlight=False, soft_wrap=True)
        table = Table()
        for name in ("figure", f"over {min(len(a.points), SPARK_POINTS)} runs", "first", "newest", "change"):
            table.add_column(name, no_wrap=name.startswith("over"))
        for row in figure_rows(a):
            table.add_row(*map(Text, row))  # a store's labels and figures: text, never markup
        print_table(console, table)
        for line in detail_lines(a):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.print("")
    console.print(f"rules: {changes.RULES}", markup=False, highlight=False, soft_wrap=True)


def point_note(a: Analysed, point: Point) -> str:
    notes = []
    idx = next((i for i, p in enumerate(a.judged) if p is point), None)
    for shift in a.found.shifts:
        if shift.index == idx:
            notes.append(f"change point {shift.size:+.1%} ({shift.verdict or 'no interval'})")
    for o in a.found.outliers:
        if o.index == idx:
            notes.append(f"{'pending' if o.pending else 'outlier'} {o.off:+.1%}")
    if point.contended:
        notes.append("contended, left out")
    if point.summary is None and not point.contended:
        notes.append("no ok round")
    if point.non_compliant:
        notes.append(compliance_marks.NON_COMPLIANT)
    return "; ".join(notes)


def markdown(analysed: Sequence[Analysed], heading: str) -> str:
    out = [f"# {heading}", "", f"Rules: {changes.RULES}.", ""]
    for a in analysed:
        out += [f"## {title(a)}", ""]
        keys = [k for k in FIGURES if any(p.value(k) is not None for p in a.points)]
        out.append("| date | run | " + " | ".join(LABEL[k] for k in keys) + " | note |")
        out.append("| --- | --- | " + " | ".join("---:" for _ in keys) + " | --- |")
        for p in a.points:
            out.append(f"| {p.date} | {p.run_id} | " + " | ".join(cell(p, k) for k in keys)
                       + f" | {point_note(a, p)} |")
        out.append("")
        out += [f"- {short(line) if line.startswith('left out') else line}" for line in detail_lines(a)]
        out.append("")
    return "\n".join(out)

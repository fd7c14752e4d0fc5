"""One workload's window analysed: its judged points, change points, outliers, what changed, and its verdict for
``history --check`` (the exit status: README, "History").

``--check`` per workload: the newest change point decides. A regression beyond the noise (its interval below 0
for a figure where higher is better) is exit 3; none, an improvement or a change within the noise is 0. When the
newest run's rounds were all contended, that run is not judged: 7, unless a regression is found anyway (the
points before it still show one). Fewer than changes.MIN_POINTS judged points: 5. The command maps the states to
exit statuses (cli/history.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from run_benchmarks.results.history import changes, explain
from run_benchmarks.results.history.series import Point, Workload

REGRESSION, IMPROVEMENT, WITHIN, NONE = "regression", "improvement", "within noise", "no change"
TOO_FEW, CONTENDED, NO_FIGURE = "too few points", "contended", "no rate figure"


@dataclass
class Analysed:
    workload: Workload
    points: list[Point]  # the window, every run (contended and failed ones too), oldest first
    judged: list[Point]  # the points the search read
    found: changes.Found
    explained: list[explain.Explained] = field(default_factory=list)  # one per change point

    @property
    def newest_contended(self) -> bool:
        newest = self.points[-1] if self.points else None
        return newest is not None and newest.summary is None and bool(newest.contended)

    @property
    def state(self) -> str:
        """The workload's verdict (module docstring)."""
        if self.workload.figure is None:
            return NO_FIGURE
        shift = self.found.shifts[-1] if self.found.shifts else None
        if shift is not None and shift.verdict == REGRESSION:
            return REGRESSION
        if self.newest_contended:
            return CONTENDED
        if not self.found.judged:
            return TOO_FEW
        if shift is None:
            return NONE
        return shift.verdict or WITHIN

    def line(self) -> str:
        """The verdict in one line, with its figures."""
        state, shift = self.state, self.found.shifts[-1] if self.found.shifts else None
        if state in (REGRESSION, IMPROVEMENT, WITHIN) and shift is not None:
            newest = self.judged[shift.index]
            return f"{state}: the newest change point, {shift.size:+.1%} on {newest.date} (run {newest.run_id})"
        if state == CONTENDED:
            newest = self.points[-1]
            return f"not judged: the newest run {newest.run_id} was contended ({'; '.join(newest.contended)})"
        if state == TOO_FEW:
            return f"not judged: {self.found.why}"
        if state == NO_FIGURE:
            return "not judged: no tokens/s or samples/s in its points (a micro-benchmark's figures are per size)"
        return f"no change point in {len(self.judged)} points"


@dataclass(frozen=True)
class HistoryDocument:
    """What the history formats render (formats.py)."""
    title: str
    analysed: list[Analysed]


def shift_words(analysed: Analysed, shift: changes.Shift) -> str:
    """``-8.0 % [-8.6 %, -7.4 %] on 2026-11-20 (run X); before: A .. B (19 points), after: C .. D (10)``."""
    pts = analysed.judged
    interval = (f" [{shift.interval[0]:+.1%}, {shift.interval[1]:+.1%}]" if shift.interval else
                " (no interval: a side's noise is unknown)")
    return (f"{shift.size:+.1%}{interval} on {pts[shift.index].date} (run {pts[shift.index].run_id}); "
            f"before: {pts[shift.before[0]].run_id} .. {pts[shift.before[1]].run_id} ({shift.points_before} points), "
            f"after: {pts[shift.after[0]].run_id} .. {pts[shift.after[1]].run_id} ({shift.points_after} points); "
            f"p {'<' if shift.p < 0.001 else '='} {max(shift.p, 0.001):.3f}")


def analyse(workload: Workload, points: list[Point]) -> Analysed:
    figure = workload.figure
    judged = [p for p in points if figure and p.value(figure) is not None]
    found = changes.find([p.value(figure) for p in judged], [p.log_se(figure) for p in judged], figure,
                         workload.higher_is_better) if figure else changes.Found(why="no rate figure")
    explained = explain.explain(judged, [(s.before[1], s.index) for s in found.shifts])
    return Analysed(workload, points, judged, found, explained)


def outlier_of(analysed: Analysed, point: Point) -> Optional[changes.Outlier]:
    for o in analysed.found.outliers:
        if analysed.judged[o.index] is point:
            return o
    return None

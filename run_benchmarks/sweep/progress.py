"""A sweep's progress: points done and left with an ETA from the points done (rich), the current point's
steps, and one line per finished point (also where stderr is no terminal: CI logs keep them)."""
from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.plan import CasePlan, RoundPlan
from run_benchmarks.sweep.grid import Point
from run_benchmarks.sweep.state import Row

_STYLE = {"ok": "green", "oom": "red", "failed": "red", "timeout": "yellow", "unsupported": "magenta",
          "skipped": "dim", "interrupted": "yellow"}


def describe(point: Point) -> str:
    labels = " ".join(f"{k}={v}" for k, v in point.labels.items())
    return f"p{point.index:02d} {point.case_name}" + (f" [{labels}]" if labels else "")


class SweepProgress:
    """The RoundExecutor's reporter for a sweep, plus the sweep's own point counter."""

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.done = console, total, 0
        self.started = time.monotonic()
        self.live = console.is_terminal
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeRemainingColumn(), console=console, transient=True, disable=not self.live)
        self.points: TaskID = self.bar.add_task("points", total=total)
        self.steps: Optional[TaskID] = None

    def __enter__(self) -> "SweepProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def point_started(self, point: Point, what: str = "") -> None:
        self.console.print(f"[bold]▶ [{self.done + 1}/{self.total}][/] {escape(describe(point))}{escape(what)}"
                           f"{self._eta()}", soft_wrap=True)

    def point_finished(self, row: Row, counted: bool = True) -> None:
        if counted:
            self.done += 1
            self.bar.update(self.points, completed=self.done)
        style = _STYLE.get(row.status, "")
        tokens = f" {row.tokens_per_s_per_device:,.0f} tok/s/dev" if row.tokens_per_s_per_device else ""
        why = f": {escape(row.reason)}" if row.reason and row.status != "ok" else ""
        self.console.print(f"  [{style}]{row.status}[/]{tokens}{why}", soft_wrap=True)

    def _eta(self) -> str:
        if not self.done:
            return ""
        left = (time.monotonic() - self.started) / self.done * (self.total - self.done)
        return f"  (ETA {left:.0f} s for {self.total - self.done} point(s) left)"

    # -- the rounds' reporter
    def round_started(self, case: CasePlan, rnd: RoundPlan) -> None:
        if self.steps is not None:
            self.bar.remove_task(self.steps)
        self.steps = self.bar.add_task(f"  {case.name} round {rnd.index}", total=case.workload.train.steps)

    def progress(self, case: CasePlan, rnd: RoundPlan, step: int, live=None) -> None:
        if self.steps is not None:
            self.bar.update(self.steps, completed=step + 1)

    def round_finished(self, case: CasePlan, rnd: RoundPlan, result: RoundResult) -> None:
        if self.steps is not None:
            self.bar.remove_task(self.steps)
            self.steps = None

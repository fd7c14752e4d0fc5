"""Live progress of a running round: step, tokens/s per device, loss and time left, read from rank 0's
step records as they are written.

On a terminal it is a rich progress bar that disappears when the round ends (its result line stays); in
a log or a pipe it is a plain line every fifth of the steps, so CI logs and ``tee`` stay readable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from training.contract import perflog


@dataclass(frozen=True)
class LiveStep:
    """The latest step rank 0 reported: what a person watching wants to see of it."""

    step: int  # 0-based, as in the records
    tokens_per_s: Optional[float]  # rank 0's tokens over its step time: per device
    loss: Optional[float]
    warmup: bool
    step_time_s: float

    @classmethod
    def of(cls, record: perflog.StepRecord) -> "LiveStep":
        rate = record.tokens / record.step_time_s if record.step_time_s > 0 else None
        return cls(record.step, rate, record.loss, record.warmup, record.step_time_s)

    def text(self) -> str:
        parts = [f"{self.tokens_per_s:,.0f} tok/s/dev" if self.tokens_per_s is not None else "",
                 f"loss {self.loss:.4g}" if self.loss is not None else "", "(warm-up)" if self.warmup else ""]
        return "  ".join(p for p in parts if p)


class LiveProgress:
    """One round's progress at a time, on ``console`` (stderr)."""

    def __init__(self, console: Console):
        self.console = console
        self.live = console.is_terminal
        self.bar: Optional[Progress] = None
        self.task: Optional[TaskID] = None
        self.total = 0
        self.shown = -1

    def start(self, label: str, total_steps: int) -> None:
        self.stop()
        self.total, self.shown = total_steps, -1
        if self.live:
            self.bar = Progress(TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[figures]}"), TextColumn("ETA"), TimeRemainingColumn(),
                                console=self.console, transient=True, auto_refresh=False)
            self.bar.start()
            self.task = self.bar.add_task(label, total=total_steps, figures="")

    def update(self, step: int, live: Optional[LiveStep]) -> None:
        figures = live.text() if live is not None else ""
        if self.bar is not None and self.task is not None:
            # drawn here, at the orchestrator's poll, not by rich's own thread 10 times a second: that thread
            # would take the CPU from the ranks being measured
            self.bar.update(self.task, completed=step + 1, figures=figures, refresh=True)
            return
        every = max(1, self.total // 5)
        if (step + 1) // every > (self.shown + 1) // every:  # a fifth of the steps more since the last line
            self.shown = step
            left = f"  ETA {live.step_time_s * (self.total - step - 1):.0f} s" if live and step + 1 < self.total else ""
            self.console.print(f"  step {step + 1}/{self.total}" + (f"  {figures}" if figures else "") + left,
                               markup=False, highlight=False)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
        self.bar, self.task = None, None

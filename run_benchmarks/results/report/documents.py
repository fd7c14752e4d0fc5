"""What a report format is (``Format``: how it renders, whether it draws charts) and the documents the commands
hand it: a report's selection, a comparison, tables. Kept apart from the registries (formats.py), which the
formats themselves never import."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

if TYPE_CHECKING:
    from rich.console import Console

    from run_benchmarks.results.report.views import View

Rendered = Union[str, Callable[["Console"], None]]  # text, or what prints itself on a console (terminal formats)


@dataclass(frozen=True)
class Format:
    render: Callable[[Any], Rendered]
    charts: bool = False  # draws charts: the command makes them (matplotlib) only for such a format
    width: int = 160  # a terminal format written to a file: its columns


@dataclass(frozen=True)
class ReportDocument:
    """What ``accelbench report`` renders."""

    title: str
    summaries: Sequence[Any]  # report/summary.py CaseSummary
    attempts: Sequence[Any]
    checks: Sequence[Any]  # the figures' reference checks (--check)
    losses: Sequence[Any]  # the loss verdicts (--check)
    root: Path


@dataclass(frozen=True)
class CompareDocument:
    """What ``accelbench compare`` renders: two selections and their paired rows."""

    a: Any
    b: Any
    rows: Sequence[Any]


@dataclass(frozen=True)
class TablesDocument:
    """What ``accelbench table`` and ``sweep`` render: views, the charts drawn for them, and whether the title
    heads the page (a sweep's several tables) or the one view carries it (a table)."""

    title: str
    views: Sequence["View"]
    chart: Optional[str] = None
    heading: bool = True
    data: Any = None  # what a data format writes whole: a published table's cells (results/tables/, JSON)

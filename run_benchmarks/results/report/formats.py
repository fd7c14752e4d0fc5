"""Report formats as plug-ins, in the one registry style (run_benchmarks/registry.py): a command picks a format
by name and writes what it renders (cli/report.py ``emit``), never by a chain of ifs. ``REPORT_FORMATS`` render
``accelbench report``'s selection of stored rounds, ``COMPARE_FORMATS`` a comparison, ``TABLE_FORMATS`` tables
(``accelbench table`` and ``sweep``). The built-ins are registered by path: a format's libraries (matplotlib
for HTML) load only when it is chosen, and ``--help`` lists the names without loading any.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from run_benchmarks.registry import Registry

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


REPORT_FORMATS: Registry[Format] = Registry("report format")
REPORT_FORMATS.register("terminal", "run_benchmarks.results.report.report_formats:TERMINAL")
REPORT_FORMATS.register("markdown", "run_benchmarks.results.report.report_formats:MARKDOWN")
REPORT_FORMATS.register("html", "run_benchmarks.results.report.report_formats:HTML")
REPORT_FORMATS.register("json", "run_benchmarks.results.report.report_formats:JSON")  # the raw attempts
REPORT_FORMATS.register("csv", "run_benchmarks.results.report.report_formats:CSV")  # the raw attempts
REPORT_FORMATS.register("summary-json", "run_benchmarks.results.report.report_formats:SUMMARY_JSON")
REPORT_FORMATS.register("summary-csv", "run_benchmarks.results.report.report_formats:SUMMARY_CSV")

COMPARE_FORMATS: Registry[Format] = Registry("compare format")
COMPARE_FORMATS.register("terminal", "run_benchmarks.results.report.report_formats:COMPARE_TERMINAL")
COMPARE_FORMATS.register("markdown", "run_benchmarks.results.report.report_formats:COMPARE_MARKDOWN")

TABLE_FORMATS: Registry[Format] = Registry("table format")
TABLE_FORMATS.register("terminal", "run_benchmarks.results.report.table_formats:TERMINAL")
TABLE_FORMATS.register("markdown", "run_benchmarks.results.report.table_formats:MARKDOWN")
TABLE_FORMATS.register("html", "run_benchmarks.results.report.table_formats:HTML")

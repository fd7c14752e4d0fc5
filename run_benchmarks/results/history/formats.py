"""``accelbench history``'s formats, in the one registry style (as report/formats.py registers the report's): each
registered by path, so matplotlib loads only for the HTML page and ``--help`` lists the names without loading
any. What they render: analysis.HistoryDocument."""
from __future__ import annotations

from run_benchmarks.registry import Registry
from run_benchmarks.results.report.documents import Format

HISTORY_FORMATS: Registry[Format] = Registry("history format")
HISTORY_FORMATS.register("terminal", "run_benchmarks.results.history.renderers:TERMINAL")
HISTORY_FORMATS.register("markdown", "run_benchmarks.results.history.renderers:MARKDOWN")
HISTORY_FORMATS.register("html", "run_benchmarks.results.history.renderers:HTML")
HISTORY_FORMATS.register("json", "run_benchmarks.results.history.renderers:JSON")

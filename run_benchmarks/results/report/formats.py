"""Report formats as plug-ins, in the one registry style (run_benchmarks/registry.py): a command picks a format
by name and writes what it renders (cli/report.py ``emit``), never by a chain of ifs. ``REPORT_FORMATS`` render
``accelbench report``'s selection of stored rounds, ``COMPARE_FORMATS`` a comparison, ``TABLE_FORMATS`` a
published table beside our runs (``accelbench table``), ``SWEEP_FORMATS`` a sweep's tables. The built-ins are registered by path: a format's libraries (matplotlib
for HTML) load only when it is chosen, and ``--help`` lists the names without loading any. What a format is
and what it renders: documents.py.
"""
from __future__ import annotations

from run_benchmarks.registry import Registry
from run_benchmarks.results.report.documents import Format

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
TABLE_FORMATS.register("json", "run_benchmarks.results.report.table_formats:JSON")  # a published table's cells

SWEEP_FORMATS: Registry[Format] = Registry("sweep format")  # a sweep's tables: the table formats but JSON
SWEEP_FORMATS.register("terminal", "run_benchmarks.results.report.table_formats:TERMINAL")
SWEEP_FORMATS.register("markdown", "run_benchmarks.results.report.table_formats:MARKDOWN")
SWEEP_FORMATS.register("html", "run_benchmarks.results.report.table_formats:HTML")

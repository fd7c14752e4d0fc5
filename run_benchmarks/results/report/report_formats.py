"""The built-in formats of ``accelbench report`` and ``compare`` (registered in formats.py by path)."""
from __future__ import annotations

from run_benchmarks.results.breakdown.words import changed_parts
from run_benchmarks.results.report import compliance_marks, export, markdown
from run_benchmarks.results.report.documents import CompareDocument, Format, ReportDocument
from run_benchmarks.results.report.summary import untrained_flags
from run_benchmarks.results.report.terminal import compare_table, print_summaries, print_table


def _html(doc: ReportDocument) -> str:
    from run_benchmarks.results.report import html  # its charts need matplotlib: imported only for an HTML page

    return html.render(doc.title, doc.summaries, doc.attempts, doc.checks, doc.losses)


TERMINAL = Format(lambda doc: lambda console: print_summaries(console, doc.summaries, doc.title))
MARKDOWN = Format(lambda doc: markdown.report(doc.summaries, doc.title))
HTML = Format(_html, charts=True)
JSON = Format(lambda doc: export.to_json(doc.attempts, doc.root))
CSV = Format(lambda doc: export.to_csv(doc.attempts, doc.root))
SUMMARY_JSON = Format(lambda doc: export.summary_json(doc.summaries, doc.root))
SUMMARY_CSV = Format(lambda doc: export.summary_csv(doc.summaries, doc.root))


def _compare_terminal(doc: CompareDocument):
    def show(console) -> None:
        rows = doc.rows
        print_table(console, compare_table(doc.a, doc.b, rows))
        for line in compliance_marks.pair_lines(rows):  # what each departing side departs in
            console.print(f"⚑ {line}", markup=False, highlight=False, soft_wrap=True)
        judged = [r for r in rows if not r.contended]  # a contended pair: not even where its time moved
        for label, line in changed_parts(judged):  # where the step's time moved (both sides measured a breakdown)
            console.print(f"{label}: {line}", markup=False, highlight=False, soft_wrap=True)
        for row in rows:  # named once per round, each in one line: the table's cells only say "not judged"
            for line in row.contended:
                console.print(f"not judged: {row.label}: {line}", markup=False, highlight=False, soft_wrap=True)
        for side, summary in ((side, getattr(row, side.lower())) for row in rows for side in ("A", "B")):
            for flag in untrained_flags(summary.attempts) if summary is not None else []:  # why a side has none
                console.print(f"⚑ {side} {summary.label}: {flag}", markup=False, highlight=False, soft_wrap=True)
    return show


COMPARE_TERMINAL = Format(_compare_terminal)
COMPARE_MARKDOWN = Format(lambda doc: markdown.compare_table(doc.a, doc.b, doc.rows))

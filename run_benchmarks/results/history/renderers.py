"""The built-in formats of ``accelbench history`` (registered in formats.py by path)."""
from __future__ import annotations

from run_benchmarks.results.history import export, text
from run_benchmarks.results.history.analysis import HistoryDocument
from run_benchmarks.results.report.documents import Format


def _html(doc: HistoryDocument) -> str:
    from run_benchmarks.results.history import page  # matplotlib: imported only for the page

    return page.render(doc.analysed, doc.title)


TERMINAL = Format(lambda doc: lambda console: text.print_terminal(console, doc.analysed, doc.title))
MARKDOWN = Format(lambda doc: text.markdown(doc.analysed, doc.title))
HTML = Format(_html, charts=True)
JSON = Format(lambda doc: export.to_json(doc.analysed, doc.title))

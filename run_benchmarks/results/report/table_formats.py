"""The built-in formats of ``accelbench table`` and ``sweep`` (registered in formats.py by path)."""
from __future__ import annotations

from run_benchmarks.results.report.documents import Format, TablesDocument
from run_benchmarks.results.report.views import html_page, to_markdown, to_rich


def _terminal(doc: TablesDocument):
    def show(console) -> None:
        if doc.heading:
            console.print(doc.title, markup=False, highlight=False)
        for view in doc.views:
            console.print(to_rich(view))
    return show


def _markdown(doc: TablesDocument) -> str:
    tables = "\n".join(to_markdown(view) for view in doc.views)
    return f"## {doc.title}\n\n{tables}" if doc.heading else tables


def _json(doc: TablesDocument) -> str:
    import json

    from run_benchmarks.results.tables.render import to_json

    return json.dumps(to_json(doc.data), indent=1) + "\n"


TERMINAL = Format(_terminal, width=200)
MARKDOWN = Format(_markdown)
HTML = Format(lambda doc: html_page(doc.title, doc.views, doc.chart), charts=True)
JSON = Format(_json)  # a published table's cells, whole (``accelbench table`` only: a sweep has none)

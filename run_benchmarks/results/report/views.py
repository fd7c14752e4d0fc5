"""Tables as plain data (a title, headers, rows, notes) and their renderers: the terminal (rich), Markdown and
a self-contained HTML page. The sweep's views and the task figures build them."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional, Sequence

from rich.table import Table
from rich.text import Text


@dataclass
class View:
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str]


def to_rich(view: View) -> Table:
    # a sweep's axes and values, a table's notes: text, never markup (as rich styles a str title and caption)
    table = Table(title=Text(view.title, style="table.title"),
                  caption=Text("\n".join(view.notes), style="table.caption") if view.notes else None)
    for header in view.headers:
        table.add_column(header, overflow="fold")
    for row in view.rows:
        table.add_row(*map(Text, row), style="red" if any(c == "OOM" for c in row) else None)  # figures: text
    return table


def to_markdown(view: View) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    lines = [f"### {esc(view.title)}", "", "| " + " | ".join(map(esc, view.headers)) + " |",
             "|" + "|".join("---" for _ in view.headers) + "|"]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in view.rows]
    lines += [""] + [f"{esc(n)}" for n in view.notes]
    return "\n".join(lines) + "\n"


def to_html(view: View) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in view.headers)
    body = "".join("<tr>" + "".join(f'<td class="{"oom" if c == "OOM" else ""}">{html.escape(c)}</td>' for c in r)
                   + "</tr>" for r in view.rows)
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in view.notes)
    return f"<h2>{html.escape(view.title)}</h2><table><tr>{head}</tr>{body}</table>{notes}"


def html_page(title: str, views: Sequence[View], chart: Optional[str] = None) -> str:
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1em}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}td.oom{background:#fdd;color:#900}")
    parts = "".join(to_html(v) for v in views)
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>{parts}{chart or ''}</body></html>\n")

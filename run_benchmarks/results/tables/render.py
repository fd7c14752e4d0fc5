"""A built reference table (core.Built) as text and data: the ``View`` the terminal, Markdown and HTML renderers
print (report/views.py), and the JSON document (every figure as a number, with its source and conditions).

Columns: the source's labels, the hardware our runs ran on, per measure the published figure (as printed, and
in our formula where the table converts it), ours and the ratio (ours / published; absent where the source
publishes none), the table's extra columns, the settings each row ran with (or would: the shipped sweep's), and
the source. A ratio on other hardware than the source's says it is a twin; a run whose setup is not the one
the source measured shows no ratio and says which setup the source had."""
from __future__ import annotations

import math
from typing import Any, Optional

from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.views import View
from run_benchmarks.results.tables.core import Built, Measure, Row

NOT_RUN = "not run"
TWIN = "CPU twin, not a comparison"
RATIO_RULE = ("ratio = ours / published, the mean over our ok rounds against the source's figure, both in our "
              "units and formula; on other hardware than the source's the ratio is a twin's: it shows the table "
              "fills, it compares nothing")


def published_text(built: Built, row: Row, measure: Measure) -> str:
    choice = built.choice(row, measure)
    if choice.figure is None:
        return "-"
    figure = choice.figure
    text = figure.printed + (f" [{figure.setup}]" if figure.setup else "")
    converted = built.table.conversion(measure, figure, row.cell)
    return f"{text} = {converted}" if converted else text


def ours_text(built: Built, row: Row, measure: Measure) -> str:
    summary = row.ours.get(measure.name)
    if summary is not None:
        return built.table.ours_text(measure, summary)
    if row.hardware is not None:  # this row ran, but nothing of this measure
        return "-"
    return row.cell.why_not_run or NOT_RUN


def ratio_text(built: Built, row: Row, measure: Measure) -> str:
    summary, choice = row.ours.get(measure.name), built.choice(row, measure)
    if summary is None or choice.figure is None:
        return "-"
    if not choice.matches:
        return f"- (the source measured {choice.figure.setup or 'another setup'})"
    value = built.ratio(row, measure)
    if value is None:
        return "-"
    if built.twin(row):
        label = TWIN if str(row.hardware).lower() == "cpu" else f"on {row.hardware}, not {built.source_hardware(row)}"
        return f"{value:.3g}x ({label})"
    return f"{value:.2f}x"


def settings_text(built: Built, row: Row) -> str:
    if row.any_summary is not None:
        return built.table.settings(row)
    return built.planned.get(row.cell.id) or built.table.intended(row.cell)


def source_text(built: Built, row: Row) -> str:
    source = built.published.sources.get(row.cell.source)
    if source is None:
        return "not in the source"
    return row.cell.source + (f" ({source.hardware})" if source.hardware else "")


def headers(built: Built) -> list[str]:
    table = built.table
    out = [*table.label_headers, "ran on"]
    for m in table.measures:
        out += [f"{m.heading} published", f"{m.heading} ours", "ratio"] if table.has_published else [m.heading]
    return out + [*table.extra_headers, "settings", "source"]


def view(built: Built) -> View:
    table = built.table
    body = []
    for row in built.rows:
        line = [*row.cell.labels, row.hardware or "-"]
        for m in table.measures:
            if table.has_published:
                line += [published_text(built, row, m), ours_text(built, row, m), ratio_text(built, row, m)]
            else:
                line.append(ours_text(built, row, m))
        body.append(line + table.extra(row) + [settings_text(built, row), source_text(built, row)])
    return View(built.title, headers(built), body, notes(built))


def notes(built: Built) -> list[str]:
    out = [*built.picked, *built.table.notes(built), *built.published.notes]
    if built.table.has_published:
        out.append(RATIO_RULE)
    for name, source in built.published.sources.items():
        said = [f"source {name}: {source.name}; {source.where}"]
        said += [f"conditions: {source.conditions}"] if source.conditions else []
        said += [f"formula: {source.formula}"] if source.formula else []
        out.append("; ".join(said))
    out += [f"left out: {n} workload(s) of {why} (not part of this table)" for why, n in built.left_out.items()]
    return out + departures(built)


def departures(built: Built) -> list[str]:
    """Each workload of the table that departs from its case's policy, with what it departs in, once."""
    seen = {id(s): s for row in built.rows for s in row.ours.values()}
    return [f"{s.label} {s.config}: {flag}" for s in seen.values() for flag in compliance_marks.flags(s.attempts)]


def _number(stats) -> Optional[dict]:
    if stats is None:
        return None
    return {"mean": stats.mean, "std": stats.std, "cv": stats.cv if math.isfinite(stats.cv) else None, "n": stats.n}


def to_json(built: Built) -> dict[str, Any]:
    """Every row with its labels, source and conditions, and per measure the published figure (as printed, its
    values in the source's units, in ours), ours (mean, spread, rounds) and the ratio."""
    table = built.table
    rows = []
    for row in built.rows:
        measures = {}
        for m in table.measures:
            summary, choice = row.ours.get(m.name), built.choice(row, m)
            figure = choice.figure
            measures[m.name] = {
                "figure": m.figure,
                "published": None if figure is None else {
                    "printed": figure.printed, "values": dict(figure.values), "setup": figure.setup,
                    "conditions": figure.conditions,
                    "in_our_units": table.published_value(m, figure, row.cell),
                    "conversion": table.conversion(m, figure, row.cell), "setup_matches": choice.matches},
                "ours": None if summary is None else {
                    "text": table.ours_text(m, summary), "value": _number(table.ours_value(m, summary)),
                    "case_name": summary.label, "statuses": dict(summary.statuses),
                    "workload_hash": summary.workload_hash},
                "ratio": built.ratio(row, m),
                "ratio_is_a_comparison": built.ratio(row, m) is not None and not built.twin(row),
            }
        rows.append({"cell": row.cell.id, "labels": dict(zip(table.label_headers, row.cell.labels)),
                     "ran_on": row.hardware, "in_source": bool(row.cell.source), "source": row.cell.source or None,
                     "conditions": row.cell.conditions, "not_run_because": None if row.hardware else
                     (row.cell.why_not_run or NOT_RUN), "settings": settings_text(built, row),
                     "extra": dict(zip(table.extra_headers, table.extra(row))), "measures": measures})
    return {"table": table.name, "title": built.title, "has_published_figures": table.has_published,
            "sources": {k: s.model_dump() for k, s in built.published.sources.items()},
            "axes": built.published.axes, "notes": notes(built), "left_out": built.left_out, "rows": rows}

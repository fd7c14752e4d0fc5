"""``accelbench table finetune [SELECT...]``: a reference table's shape from stored runs (terminal, Markdown or
HTML with its charts). The rows are selected as ``report`` selects them (run ids, prefixes and KEY=VALUE
filters), but for ``last`` (or nothing): the newest run that holds a finetune, so a run started since the sweep
does not hide it; then summarized once per workload (report/summary.py). A sweep file's ``table: finetune``
prints the same table of the sweep's run after the sweep's own (``sweep_table``)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.report import LAST, emit, parse_selection, select
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.errors import UserError
from run_benchmarks.results.report import finetune_table, views
from run_benchmarks.results.report.compare import Selection
from run_benchmarks.results.report.documents import TablesDocument
from run_benchmarks.results.report.formats import TABLE_FORMATS
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.store import ResultStore


def charts(table: list[finetune_table.TableRow]) -> str:
    from run_benchmarks.results.report import finetune_chart  # matplotlib: imported only for an HTML page

    return "".join(finetune_chart.by_model(table))


def sweep_table(db: StoreLocation, run_id: str, html: bool) -> Optional[tuple[views.View, str]]:
    """A sweep file's ``table: finetune``: the table of the sweep's run and, for HTML, its charts; None while
    the store holds no finetune of the run (a sweep whose points were all skipped)."""
    if not db.exists():
        return None
    with ResultStore(db, reader=True) as store:
        attempts = store.attempts(run_ids=[run_id])
    table, notes = finetune_table.rows(summarize(attempts))
    if not table:
        return None
    return finetune_table.view(table, f"finetune table: sweep {run_id}", notes), charts(table) if html else ""


def newest_finetune(store: ResultStore) -> tuple[Optional[Selection], list, list[str]]:
    """``last`` for this table: the newest run that holds a finetune row (runs started since, a report or a
    pretraining run, do not hide it), with a note naming it when newer runs were passed over."""
    passed = []
    for run in store.runs():
        if not run.get("attempts"):
            continue
        attempts = store.attempts(run_ids=[run["run_id"]])
        if finetune_table.rows(summarize(attempts))[0]:
            note = (f"last: run {run['run_id']}, the newest run holding a finetune ({len(passed)} newer run(s) hold "
                    f"none: {', '.join(passed[:3])}{' ...' if len(passed) > 3 else ''})") if passed else None
            return Selection(run["run_id"], (run["run_id"],), {}), attempts, [note] if note else []
        passed.append(run["run_id"])
    return None, [], []


def cmd_table(args: argparse.Namespace, console: Console) -> int:
    picked: list[str] = []
    with open_store(args) as store:
        selection = None
        if [w.strip() for w in args.select] in ([], *([w] for w in LAST)):
            selection, attempts, picked = newest_finetune(store)
        if selection is None:
            selection = parse_selection(store, args.select)
            attempts = select(store, selection)
    table, notes = finetune_table.rows(summarize(attempts))
    notes = [*picked, *notes]
    if not table:
        raise UserError(f"no Paddle or Torch LoRA or full finetune among the {len(attempts)} attempt(s) of "
                        f"{selection.text!r}", "select the runs of a finetune sweep, e.g. accelbench table "
                                               "finetune RUN_ID; configs/sweeps/finetune_table_tiny.yaml makes one")
    view = finetune_table.view(table, f"finetune table: {selection.text}", notes)
    chosen = TABLE_FORMATS.get(args.format)
    emit(console, chosen, TablesDocument(view.title, [view], charts(table) if chosen.charts else None, heading=False),
         args.output)  # a terminal table written to a file: the same table, without terminal escapes
    return EXIT_OK

"""``accelbench table finetune [SELECT...]``: a reference table's shape from stored runs (terminal, Markdown or
HTML with its charts). The rows are selected as ``report`` selects them (run ids, prefixes, ``last`` and
KEY=VALUE filters) and summarized once per workload (report/summary.py). A sweep file's ``table: finetune``
prints the same table of the sweep's run after the sweep's own (``sweep_table``)."""
from __future__ import annotations

import argparse
import io
import os
from pathlib import Path
from typing import Optional

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.report import _write, parse_selection, select
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.errors import UserError
from run_benchmarks.results.report import finetune_table, views
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


def cmd_table(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        selection = parse_selection(store, args.select)
        attempts = select(store, selection)
    table, notes = finetune_table.rows(summarize(attempts))
    if not table:
        raise UserError(f"no Paddle or Torch LoRA or full finetune among the {len(attempts)} attempt(s) of "
                        f"{selection.text!r}", "select the runs of a finetune sweep, e.g. accelbench table "
                                               "finetune RUN_ID; configs/sweeps/finetune_table_tiny.yaml makes one")
    view = finetune_table.view(table, f"finetune table: {selection.text}", notes)
    if args.format == "terminal":
        if args.output is None:
            console.print(views.to_rich(view))
        else:  # the same table, without terminal escapes
            text = Console(file=io.StringIO(), width=200, highlight=False, record=True)
            text.print(views.to_rich(view))
            _write(console, text.export_text(), args.output)
    elif args.format == "html":
        _write(console, views.html_page(view.title, [view], charts(table)), args.output)
    else:
        _write(console, views.to_markdown(view), args.output)
    return EXIT_OK

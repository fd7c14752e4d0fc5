"""``accelbench table finetune [SELECT...]``: a reference table's shape from stored runs (terminal, Markdown or
HTML with its charts). The rows are selected as ``report`` selects them (run ids, prefixes, ``last`` and
KEY=VALUE filters) and summarized once per workload (report/summary.py)."""
from __future__ import annotations

import argparse
import io

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.report import _write, parse_selection, select
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.errors import UserError
from run_benchmarks.results.report import finetune_table, views
from run_benchmarks.results.report.summary import summarize


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
        from run_benchmarks.results.report import finetune_chart  # matplotlib: imported only for an HTML page

        _write(console, views.html_page(view.title, [view], "".join(finetune_chart.by_model(table))), args.output)
    else:
        _write(console, views.to_markdown(view), args.output)
    return EXIT_OK

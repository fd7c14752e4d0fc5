"""``accelbench table NAME [SELECT...]``: a published table in its source's shape, the published figure of every
cell beside ours from the store and their ratio (results/tables/), as terminal text, Markdown, HTML (with
grouped bars) or JSON.

Which runs: SELECT as ``report`` reads it (run ids, prefixes, KEY=VALUE filters), but ``last`` is the newest run
holding rows of the table (a pretraining run or a report started since does not hide it); without one, every
run in the store, so the table fills from whatever has been run; without a store (nothing run yet) the table
still prints, every cell "not run" with the settings the table's shipped sweep would run it with (its points'
``cell`` axis, configs/sweeps/<name>_table_<hardware>.yaml). A sweep file's ``table: NAME`` prints the table of
the sweep's run after the sweep's own (``sweep_table``)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.report import LAST, emit, parse_selection, select
from run_benchmarks.cli.store_options import open_store, store_location
from run_benchmarks.results.report import views
from run_benchmarks.results.report.documents import TablesDocument
from run_benchmarks.results.report.formats import TABLE_FORMATS
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.tables import TABLES
from run_benchmarks.results.tables.core import Built, ReferenceTable, build
from run_benchmarks.results.tables.render import view

ROOT = Path(__file__).resolve().parents[2]  # the checkout that holds configs/sweeps/


def charts(built: Built) -> str:
    from run_benchmarks.results.tables import chart  # matplotlib: imported only for an HTML page

    return "".join(chart.by_group(built))


def planned(table: ReferenceTable, root: Path = ROOT) -> dict[str, str]:
    """Cell id -> what the table's shipped sweeps of the real rows run for it (their points' ``cell`` labels: the
    cell id, then a word for the side, e.g. ``llama7b-lora-1-4 paddle``); none where no sweep is there."""
    from run_benchmarks.sweep.grid import expand, load_sweep_file

    points = [p for sweep in table.sweeps if (root / sweep).is_file() for p in expand(load_sweep_file(root / sweep))]
    out: dict[str, list[str]] = {}
    for point in points:
        cell = point.labels.get("cell", "").split(" ")[0]
        if cell:
            words = " ".join([point.case_name, *([point.extern_config] if point.extern_config else []),
                              *(f"--set {s}" for s in point.sets)])
            out.setdefault(cell, []).append(words)
    return {cell: "; ".join(points) for cell, points in out.items()}


def sweep_table(db: StoreLocation, run_id: str, html: bool, name: str = "finetune") -> Optional[tuple[views.View, str]]:
    """A sweep file's ``table: NAME``: the table of the sweep's run and, for HTML, its charts; None while the
    store holds nothing of the run that belongs in the table (a sweep whose points were all skipped)."""
    if not db.exists():
        return None
    with ResultStore(db, reader=True) as store:
        attempts = store.attempts(run_ids=[run_id])
    table = TABLES.get(name)
    built = build(table, summarize(attempts), planned(table), f"{table.title}: sweep {run_id}")
    if not any(row.ours for row in built.rows):
        return None
    return view(built), charts(built) if html else ""


def newest(store: ResultStore, table: ReferenceTable) -> tuple[Optional[str], list, list[str]]:
    """``last`` for a table: the newest run holding a workload the table places (runs started since, a report
    or another task's, do not hide it), with a note naming it when newer runs were passed over."""
    passed: list[str] = []
    for run in store.runs():
        if not run.get("attempts"):
            continue
        summaries = summarize(store.attempts(run_ids=[run["run_id"]]))
        if any(not isinstance(table.place(s), str) for s in summaries):
            note = (f"last: run {run['run_id']}, the newest run holding rows of this table ({len(passed)} newer "
                    f"run(s) hold none: {', '.join(passed[:3])}{' ...' if len(passed) > 3 else ''})") if passed else ""
            return run["run_id"], summaries, [note] if note else []
        passed.append(run["run_id"])
    return None, [], []


def _summaries(args: argparse.Namespace, table: ReferenceTable) -> tuple[list, str, list[str]]:
    """The selected workloads, the words for the title and notes on how they were chosen."""
    if not args.select and not store_location(args).exists():
        return [], "nothing run yet", []
    with open_store(args) as store:
        if not args.select:
            attempts = store.attempts()
            return summarize(attempts), "every stored run" if attempts else "nothing run yet", []
        if [w.strip() for w in args.select] in ([w] for w in LAST):
            run_id, summaries, notes = newest(store, table)
            if run_id is not None:
                return summaries, run_id, notes
        selection = parse_selection(store, args.select)
        return summarize(select(store, selection)), selection.text, []


def cmd_table(args: argparse.Namespace, console: Console) -> int:
    table = TABLES.get(args.name, "e.g. accelbench table mfu")
    summaries, what, picked = _summaries(args, table)
    built = build(table, summaries, planned(table, args.root or ROOT), f"{table.title}: {what}")
    built.picked = picked
    chosen = TABLE_FORMATS.get(args.format)
    emit(console, chosen, TablesDocument(built.title, [view(built)], charts(built) if chosen.charts else None,
                                         heading=False, data=built),
         args.output)  # a terminal table written to a file: the same table, without terminal escapes
    return EXIT_OK

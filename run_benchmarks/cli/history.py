"""``accelbench history``: every selected workload's figures over time, its change points and outliers, and with
``--check`` the nightly verdict as the exit status (results/history/analysis.py)."""
from __future__ import annotations

import argparse
from typing import Optional

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_CONTENDED, EXIT_NOTHING_CHECKED, EXIT_OK, EXIT_REGRESSION
from run_benchmarks.cli.report import emit, parse_selection
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.errors import UserError
from run_benchmarks.results.history import analysis, changes, series
from run_benchmarks.results.history.analysis import HistoryDocument
from run_benchmarks.results.history.formats import HISTORY_FORMATS

EXIT_OF = {analysis.REGRESSION: EXIT_REGRESSION, analysis.CONTENDED: EXIT_CONTENDED,
           analysis.TOO_FEW: EXIT_NOTHING_CHECKED}
ORDER = (EXIT_REGRESSION, EXIT_CONTENDED, EXIT_NOTHING_CHECKED)  # 3 wins over 7, 7 over 5 (report --check's)


def select_workloads(store, words) -> list[series.Workload]:
    """Run ids (the workloads those runs measured, with their whole history) and KEY=VALUE filters, as for
    report; none: every workload in the store."""
    from run_benchmarks.results.report.compare import FACT_FILTERS
    from run_benchmarks.results.report.facts import fact_text, round_facts
    from run_benchmarks.results.store.schema import FILTER_KEYS

    selection = parse_selection(store, words) if words else None
    filters = selection.filters if selection else {}
    attempts = store.attempts({k: v for k, v in filters.items() if k in FILTER_KEYS})
    wanted = {k: v for k, v in filters.items() if k in FACT_FILTERS and k not in FILTER_KEYS}
    if wanted:
        def values(attempt, key):
            value = round_facts(attempt).facts.get(key)
            return {str(value), fact_text(value), fact_text(value).replace(",", "")}
        attempts = [a for a in attempts if all(v in values(a, k) for k, v in wanted.items())]
    started = {r["run_id"]: r["started_at"] for r in store.runs()}
    workloads = series.build(attempts, started)
    if selection and selection.run_ids:
        workloads = [w for w in workloads if any(p.run_id in selection.run_ids for p in w.points)]
    if not workloads:
        raise UserError(f"no attempt matches {' '.join(words) or 'anything'} in {store.where}",
                        "list the runs: accelbench runs")
    series.name(workloads)
    return workloads


def cmd_history(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        workloads = select_workloads(store, args.select)
    analysed = []
    for w in workloads:
        points = series.window(w.points, args.since, args.last)
        if points:
            analysed.append(analysis.analyse(w, points))
    if not analysed:
        raise UserError(f"no run of the selected workloads measured since {args.since.isoformat()}",
                        "move --since back, or leave it out")
    heading = "accelbench history" + (f": {' '.join(args.select)}" if args.select else "") + \
        (f", since {args.since.date().isoformat()}" if args.since else "") + (f", last {args.last}" if args.last else "")
    emit(console, HISTORY_FORMATS.get(args.format), HistoryDocument(heading, analysed), args.output)
    if not args.check:
        return EXIT_OK
    # JSON on stdout stays JSON: each workload's verdict is in it ("verdict"), the status is the exit code
    return print_check(console if args.format != "json" or args.output else None, analysed)


def print_check(console: Optional[Console], analysed) -> int:
    codes = [EXIT_OF.get(a.state, EXIT_OK) for a in analysed]
    code = next((c for c in ORDER if c in codes), EXIT_OK)
    if console is None:
        return code
    for a, own in zip(analysed, codes):
        console.print(f"--check: {a.workload.label}: {a.line()} (exit {own})", markup=False, highlight=False,
                      soft_wrap=True)
    if code == EXIT_NOTHING_CHECKED:
        console.print(f"--check: a workload has fewer than {changes.MIN_POINTS} judged points, the fewest a change "
                      f"can be told on ({changes.MIN_SHIFT} on each side); exit {code}", markup=False,
                      highlight=False, soft_wrap=True)
    return code

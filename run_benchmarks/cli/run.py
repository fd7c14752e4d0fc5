"""``accelbench run`` (and ``start_task.py``'s run): plan the cases, preflight, run every round, store and report."""
from __future__ import annotations

import argparse
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.markup import escape

from run_benchmarks import signals
from run_benchmarks.catalog import casename
from run_benchmarks.cli.console import make_console
from run_benchmarks.cli.exit_codes import EXIT_CONTENDED, EXIT_FAILED, EXIT_NOT_RECORDED, EXIT_OK
from run_benchmarks.cli.run_view import TerminalReporter, print_extern_configs, print_plan, print_results
from run_benchmarks.errors import UserError
from run_benchmarks.execute.environment import orchestrator_environment
from run_benchmarks.execute.outcome import ResultsUnwritable
from run_benchmarks.pathnames import write_text_atomically
from run_benchmarks.plan import RunPlan
from run_benchmarks.planner import checks as plan_checks
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import default_root, load_inputs, new_run_id, split_case_names, with_kubeconfig_exec
from run_benchmarks.results.round_result import RoundResult
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable, is_full, orchestrator_identity
from run_benchmarks.cli.store_options import store_location
from run_benchmarks.results.store.store import ResultStore


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    inputs = with_kubeconfig_exec(load_inputs(args.root or default_root(), args.test_conf, args.cluster),
                                  getattr(args, "allow_kubeconfig_exec", False))
    flagperf = getattr(args, "flagperf", None)  # start_task.py's FlagPerf options (cli/flagperf.py)
    if flagperf is not None:
        inputs = flagperf.prepare(args, inputs)
    names = split_case_names(args.case_names) or list(inputs.test_conf.cases)
    log_root = args.log_root.resolve() if args.log_root else inputs.test_conf.log_root_in(inputs.paths.root)
    if not args.log_root:  # --log-root was checked with the other arguments
        plan_checks.check_folder(log_root, f"log_root ({inputs.test_conf_path})", writable=not args.dry_run)
    plan = build_run_plan(inputs, names, new_run_id(), log_root, args.extern_config,
                          tuple(args.assignments), args.timeout)
    if getattr(args, "strict", False):
        plan_checks.refuse_non_compliant(plan.cases)
    if args.dry_run:
        print_plan(console, plan)
        print_flagperf_notes(console, flagperf)
        return EXIT_OK
    from run_benchmarks.execute.launch import Runner  # what a real run needs (paramiko among it), not a dry run
    from run_benchmarks.execute.quiet import NotQuiet

    print_flagperf_notes(make_console(stderr=True), flagperf)
    print_extern_configs(make_console(stderr=True), plan)

    environment = orchestrator_environment(inputs.paths.root)
    signals.install()  # TERM and HUP end a run as Ctrl-C does (see signals: exit 128 + the signal's number)
    err = make_console(stderr=True)
    runner = Runner(plan, TerminalReporter(err), environment, allow_version_mismatch=args.allow_version_mismatch,
                    plan_root=inputs.paths.root, require_quiet=getattr(args, "require_quiet", None),
                    say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))
    db = store_location(args, log_root, inputs.test_conf, inputs.test_conf_path, inputs.paths.root)
    store = None
    try:
        # An existing store is checked (locked, damaged) before any host is touched; a new one is created only
        # after preflight: a run refused at preflight leaves no trace.
        store = ResultStore(db) if db.exists() else None  # a --db that is no store: refused before preflight
        runner.connect_and_preflight()
        for notice in runner.notices:
            make_console(stderr=True).print(f"[yellow]warning:[/] {escape(notice)}", soft_wrap=True)
        store = runner.store = store or ResultStore(db)
        store.begin_run(plan.run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"), environment["argv"],
                        environment["accelbench_commit"], str(plan.dir), orchestrator=orchestrator_identity())
    except BaseException as exc:
        if store is not None:
            store.close()
        runner.close()
        if isinstance(exc, KeyboardInterrupt):  # nothing ran yet: nothing to record
            make_console(stderr=True).print("accelbench: interrupted during preflight; nothing ran", markup=False)
            return signals.exit_code(signals.received())
        raise
    interrupted = False
    stopped: Optional[OSError] = None  # results could not be written (disk full): the run stopped there
    refused: Optional[NotQuiet] = None  # --require-quiet: the hosts stayed busy past the deadline
    try:
        runner.run()
    except NotQuiet as exc:
        refused = exc
    except KeyboardInterrupt:
        interrupted = True
        signals.settle()  # a further signal only hurries what is left; the results are written whole
    except OSError as exc:
        if not (isinstance(exc, ResultsUnwritable) or is_full(exc)):
            raise
        stopped = exc
    finally:
        signals.settle()
        ending = "interrupted" if interrupted else "aborted" if stopped or refused else "done"
        try:
            store.end_run(plan.run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"), ending)
        except (StoreError, StoreUnavailable) as exc:
            store.unstored.append(f"the end of the run ({ending}): "
                                  f"{getattr(exc, 'reason', '') or str(exc).splitlines()[0]}")
    try:
        write_summary(plan, runner.results)
    except OSError as exc:  # the rounds' results.json and the store hold what it would have said
        stopped = stopped or exc
    if runner.results or refused is None:
        print_results(console, runner.results, plan.cases)
    if stopped is not None or store.unstored:
        report_unrecorded(plan, store, stopped, log_root)
    else:
        console.print(f"stored in {store.where} as run {plan.run_id}: accelbench report {plan.run_id} "
                      "[--format markdown|html|json|csv]", markup=False, soft_wrap=True)
    regression = EXIT_OK
    if args.check:  # imported here: the reference checks' code is ~0.15 s of start-up no other run needs
        from run_benchmarks.cli import report as report_cli
        from run_benchmarks.results.report.summary import summarize

        summaries = summarize(store.attempts(run_ids=[plan.run_id]))
        regression = report_cli.report_checks(console, report_cli.run_checks(summaries, inputs.paths.root), True,
                                              args.no_reference_expected)
    store.close()
    if interrupted:
        return signals.exit_code(signals.received())
    if stopped is not None or store.unstored:
        return EXIT_NOT_RECORDED
    if refused is not None:  # after the rounds before it, which are stored
        console.print(str(refused), markup=False, highlight=False, soft_wrap=True)
        return EXIT_FAILED if any(r.status != "ok" for r in runner.results) else EXIT_CONTENDED
    if not (runner.results and all(r.status == "ok" for r in runner.results)):
        return EXIT_FAILED
    return regression


def report_unrecorded(plan: RunPlan, store: ResultStore, stopped: Optional[OSError], log_root: Path) -> None:
    """What the run could not record and the way back, on stderr, instead of the "stored in" line."""
    err = make_console(stderr=True)
    lines = []
    if stopped is not None:
        lines.append(f"accelbench: error: run {plan.run_id} stopped: {stopped.strerror or stopped}; the rounds "
                     "before this one are kept, nothing was left half-written")
        lines.append("  fix: free space under the log root (or choose another with --log-root), then run again")
    if store.unstored:
        lines.append(f"accelbench: error: run {plan.run_id} is NOT completely stored in {store.where}:")
        lines += [f"  - {item}" for item in store.unstored]
        lines.append(f"  fix: once the store can be written again (no other process holding it, space free), add "
                     f"what the results.json files hold: accelbench store repair --db {store.where} --log-root "
                     f"{log_root}")
    for line in lines:
        err.print(line, markup=False, highlight=False, soft_wrap=True)


def write_summary(plan: RunPlan, results: list[RoundResult]) -> None:
    """summary.json: one line per round, from the same record as its results.json and its store row."""
    plan.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in results:
        record = r.record
        metrics = (record.metrics if record else None) or {}
        rows.append({"case_name": r.case_name, "round": r.round,
                     "status": record.status.value if record else r.status,
                     "reason": record.reason if record else r.reason, "results": str(r.dir / "results.json"),
                     "workload_hash": record.workload_hash if record else None,
                     **{key: metrics.get(key) for key in ("tokens_per_s_per_device", "tflops_per_device", "mfu")}})
    write_text_atomically(plan.dir / "summary.json", json.dumps({"run_id": plan.run_id, "rounds": rows}, indent=2)
                          + "\n")


def check_run_args(args: argparse.Namespace) -> None:
    """What the run options alone can tell is wrong, before any file is read."""
    given = getattr(args, "case_names", None) or []
    if given and not split_case_names(given):
        raise UserError(f"case name {given[0]!r}: no case named",
                        "omit --case_name (and CASE_NAME) to run test_conf's list, or name one, "
                        f"e.g. {casename.EXAMPLE}")
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UserError(f"--timeout {timeout:g}: the deadline must be a finite number of seconds above 0",
                        "e.g. --timeout 600; omit it to use timeout_s of test_conf")
    writes = not getattr(args, "dry_run", False)
    if getattr(args, "log_root", None) is not None:
        plan_checks.check_folder(args.log_root.resolve(), "--log-root", writable=writes)
    if getattr(args, "db", None) is not None and args.db.path is not None:
        plan_checks.check_file(args.db.path.resolve(), "--db", writable=writes)


def print_flagperf_notes(console: Console, flagperf) -> None:
    if flagperf is not None and flagperf.notes:
        console.print(getattr(flagperf, "heading", "FlagPerf's options, as this run takes them:"), markup=False)
        for note in dict.fromkeys(flagperf.notes):
            console.print(f"  {note}", markup=False, soft_wrap=True)

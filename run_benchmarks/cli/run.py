"""``accelbench run`` (and ``start_task.py``'s run): plan the cases, preflight, run every round, store and report."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from run_benchmarks import signals
from run_benchmarks.catalog import casename
from run_benchmarks.cli.console import make_console
from run_benchmarks.cli.exit_codes import EXIT_CONTENDED, EXIT_FAILED, EXIT_NOT_RECORDED, EXIT_OK
from run_benchmarks.cli.run_view import TerminalReporter, print_extern_configs, print_plan, print_results
from run_benchmarks.errors import UserError
from run_benchmarks.execute.environment import orchestrator_environment
from run_benchmarks.plan import RunPlan
from run_benchmarks.planner import checks as plan_checks
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import default_root, load_inputs, new_run_id, split_case_names, with_kubeconfig_exec
from run_benchmarks.cli.store_options import store_location

if TYPE_CHECKING:  # the Runner's module loads what a real run needs; a dry run needs none of it
    from run_benchmarks.execute.runner import Outcome


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
    from run_benchmarks.execute.runner import Runner  # what a real run needs (paramiko among it), not a dry run

    print_flagperf_notes(make_console(stderr=True), flagperf)
    print_extern_configs(make_console(stderr=True), plan)
    err = make_console(stderr=True)
    store_at = store_location(args, log_root, inputs.test_conf, inputs.test_conf_path, inputs.paths.root)
    runner = Runner(plan, store_at, TerminalReporter(err), orchestrator_environment(inputs.paths.root),
                    plan_root=inputs.paths.root, allow_version_mismatch=args.allow_version_mismatch,
                    require_quiet=getattr(args, "require_quiet", None),
                    check_root=inputs.paths.root if args.check else None,
                    say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True),
                    warn=lambda notice: err.print(f"[yellow]warning:[/] {escape(notice)}", soft_wrap=True))
    outcome = runner.run()
    return say_outcome(console, outcome, plan, log_root, args)


def say_outcome(console: Console, outcome: Outcome, plan: RunPlan, log_root: Path, args: argparse.Namespace) -> int:
    """The run's results, where they are stored (or what is not, and the way back), --check's verdicts; the
    exit status (README, "Exit status")."""
    if not outcome.started:
        make_console(stderr=True).print("accelbench: interrupted during preflight; nothing ran", markup=False)
        return signals.exit_code(outcome.signal)
    if outcome.results or outcome.refused is None:
        print_results(console, outcome.results, plan.cases)
    if outcome.recorded:
        console.print(f"stored in {outcome.where} as run {plan.run_id}: accelbench report {plan.run_id} "
                      "[--format markdown|html|json|csv]", markup=False, soft_wrap=True)
    else:
        report_unrecorded(outcome, log_root)
    regression = EXIT_OK
    if outcome.verdicts is not None:  # imported here: the reference checks' code is ~0.15 s of start-up
        from run_benchmarks.cli import report as report_cli

        regression = report_cli.report_checks(console, outcome.verdicts, True, args.no_reference_expected)
    if outcome.refused is not None and not outcome.interrupted and outcome.recorded:
        console.print(str(outcome.refused), markup=False, highlight=False, soft_wrap=True)
    return exit_status(outcome, regression)


def exit_status(outcome: Outcome, regression: int = EXIT_OK) -> int:
    """The first that applies: interrupted (128 + N), not recorded (4), hosts busy past --require-quiet (1 when
    a round before failed, else 7), a round not ok (1), else what --check found (``regression``)."""
    if outcome.interrupted:
        return signals.exit_code(outcome.signal)
    if not outcome.recorded:
        return EXIT_NOT_RECORDED
    if outcome.refused is not None:  # after the rounds before it, which are stored
        return EXIT_FAILED if any(r.status != "ok" for r in outcome.results) else EXIT_CONTENDED
    if not outcome.all_ok:
        return EXIT_FAILED
    return regression


def report_unrecorded(outcome: Outcome, log_root: Path) -> None:
    """What the run could not record and the way back, on stderr, instead of the "stored in" line."""
    err = make_console(stderr=True)
    lines = []
    stopped = outcome.stopped
    if stopped is not None:
        lines.append(f"accelbench: error: run {outcome.run_id} stopped: {stopped.strerror or stopped}; the rounds "
                     "before this one are kept, nothing was left half-written")
        lines.append("  fix: free space under the log root (or choose another with --log-root), then run again")
    if outcome.unstored:
        lines.append(f"accelbench: error: run {outcome.run_id} is NOT completely stored in {outcome.where}:")
        lines += [f"  - {item}" for item in outcome.unstored]
        lines.append(f"  fix: once the store can be written again (no other process holding it, space free), add "
                     f"what the results.json files hold: accelbench store repair --db {outcome.where} --log-root "
                     f"{log_root}")
    for line in lines:
        err.print(line, markup=False, highlight=False, soft_wrap=True)


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

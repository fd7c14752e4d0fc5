"""``accelbench sweep``: its options, and the command from the grid to the tables (new, resumed or shown)."""
from __future__ import annotations

import argparse
from pathlib import Path
from dataclasses import replace
from typing import Optional

from rich.console import Console

from run_benchmarks.catalog.compliance import NON_COMPLIANT
from run_benchmarks.planner import checks as plan_checks
from run_benchmarks.cli import report as report_cli
from run_benchmarks.cli import table as table_cli
from run_benchmarks import signals
from run_benchmarks.execute.environment import orchestrator_environment
from run_benchmarks.errors import UserError
from run_benchmarks.cli.console import make_console
from run_benchmarks.cli import run as run_cli
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_NOT_RECORDED, EXIT_OK
from run_benchmarks.planner.inputs import default_root, load_inputs, new_run_id, with_kubeconfig_exec
from run_benchmarks.pathnames import component
from run_benchmarks.results.report.documents import TablesDocument
from run_benchmarks.results.report.formats import SWEEP_FORMATS
from run_benchmarks.sweep import views
from run_benchmarks.cli.store_options import store_location
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.sweep.grid import SweepFile, expand, load_sweep_file, merge_command_line
from run_benchmarks.sweep.progress import SweepProgress, describe
from run_benchmarks.sweep.state import Row, SweepOptions, load, save

SWEEP_FILE_SUFFIXES = (".yaml", ".yml")


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    err = make_console(stderr=True)
    inputs = with_kubeconfig_exec(load_inputs(args.root or default_root(), args.test_conf, args.cluster),
                                  getattr(args, "allow_kubeconfig_exec", False))
    log_root = args.log_root.resolve() if args.log_root else inputs.test_conf.log_root_in(inputs.paths.root)
    if not args.log_root:
        plan_checks.check_folder(log_root, f"log_root ({inputs.test_conf_path})", writable=not args.dry_run)
    if args.show:
        run_id = resolve_sweep(log_root, args.show)
        options, rows = load(_run_dir(log_root, run_id))
        return show(console, args, options, rows, run_id, log_root)
    if args.resume:
        if args.case_names or args.grid or args.file or args.assignments or args.max_batch:
            raise UserError("--resume takes the grid from the sweep it resumes",
                            "drop the case names, --file, --grid, --set and --max-batch")
        run_id = resolve_sweep(log_root, args.resume)
        options, _ = load(_run_dir(log_root, run_id))
    else:
        sweep_file, given = file_and_names(args.file, args.case_names)
        base = load_sweep_file(sweep_file) if sweep_file else SweepFile()
        names = given or ([] if base.cases else list(inputs.test_conf.cases))  # else test_conf's list
        grid = merge_command_line(base, names, args.grid, args.assignments)
        if args.extern_config:
            grid = grid.model_copy(update={"set": {"extern_config": args.extern_config, **grid.set}})
        points = expand(grid)
        axes = (["case_name"] if len(grid.cases) > 1 else []) + list(grid.axes)
        options = SweepOptions(points=points, axes=axes, max_batch=args.max_batch,
                               max_batch_limit=args.max_batch_limit, scaling=grid.scaling, timeout_s=args.timeout,
                               allow_version_mismatch=args.allow_version_mismatch, table=grid.table)
        run_id = new_run_id()
    from run_benchmarks.sweep.run import Sweep, SweepContext, pending_rows  # the rounds (paramiko): a sweep's only

    run_dir = log_root / run_id
    if not args.dry_run:  # the id to --show or --resume it by, before anything runs
        err.print(f"sweep {run_id}: {len(options.points)} point(s); logs in {run_dir}", markup=False, soft_wrap=True)
    environment = orchestrator_environment(inputs.paths.root)
    ctx = SweepContext(inputs, run_id, run_dir, options, environment)
    with SweepProgress(err, len(options.points)) as progress:
        sweep = Sweep(ctx, progress)
        planned = [sweep.plan(p, ("train.micro_batch_size=1",) if options.max_batch else ()) for p in options.points]
        if args.strict:  # every point planned: refused before any of them runs
            plan_checks.refuse_non_compliant([item.case for item in planned if item.case is not None])
        if args.dry_run:
            for item in planned:
                verdict = item.case.compliance if item.case is not None else None
                marked = f" ({NON_COMPLIANT}: {', '.join(verdict.keys)})" if verdict and not verdict.compliant else ""
                what = item.skipped.status + ": " + item.skipped.reason if item.skipped else "runs" + marked
                console.print(f"{describe(item.point)}  {item.point.sets or ''}  -> {what}", markup=False,
                              soft_wrap=True)
            return EXIT_OK
        from run_benchmarks.sweep.runner import run_sweep

        outcome = run_sweep(sweep, planned, _db(args, ctx.inputs, log_root),
                            inputs.paths.root if args.check else None,
                            warn=lambda notice: err.print(f"warning: {notice}", markup=False, soft_wrap=True))
    if outcome.stopped is not None:  # results could not be written (disk full): what was written is kept
        err.print(f"accelbench: error: sweep {run_id} stopped: {outcome.stopped.strerror or outcome.stopped}; free "
                  "space under the log root, then resume it", markup=False, soft_wrap=True)
    if outcome.unstored:
        run_cli.report_unrecorded(replace(outcome, stopped=None), log_root)
    rows = ctx.rows + pending_rows(options.points, ctx.rows)
    save(run_dir, options, rows)
    code = show(console, args, options, rows, run_id, log_root)
    console.print(f"sweep {run_id}: accelbench sweep --show {run_id}"
                  + (f" --log-root {log_root}" if args.log_root else "") + " [--format markdown|html]",
                  markup=False, soft_wrap=True)
    stopped = outcome.interrupted or outcome.stopped is not None
    if outcome.verdicts is not None and not stopped:  # each point's figures against the references, as run's
        code = report_cli.report_checks(console, outcome.verdicts, True, args.no_reference_expected) or code
    if stopped:
        resume = f"accelbench sweep --resume {run_id}" + (f" --log-root {log_root}" if args.log_root else "")
        err.print(f"accelbench: sweep {run_id} stopped; {sum(r.status in ('pending', 'interrupted') for r in rows)} "
                  f"point(s) left. Resume with: {resume}", markup=False, soft_wrap=True)
    if outcome.interrupted:
        return signals.exit_code(outcome.signal)
    return code if outcome.recorded else EXIT_NOT_RECORDED


def show(console: Console, args: argparse.Namespace, options: SweepOptions, rows: list[Row], run_id: str,
         log_root: Path) -> int:
    table_views = [views.points(rows, options.axes)]
    main = views.pivot(rows, options.axes, args.across)
    if main is not None and len(options.axes) > 1:
        table_views.append(main)
    if args.versus:
        axis, _, pair = args.versus.partition("=")
        a, _, b = pair.partition(",")
        if not (axis and a and b):
            raise UserError(f"--versus {args.versus!r}: expected AXIS=A,B", "e.g. --versus framework=torch,paddle")
        versus = views.versus(rows, axis, a, b)
        if versus is not None:
            table_views.append(versus)
    charts = []
    if options.scaling is not None:
        scaled = views.scaling(rows, options.scaling.axis, options.scaling.mode)
        if scaled is not None:
            table_views.append(scaled)
        charts.append(views.scaling_chart(rows, options.scaling.axis))
    chosen = SWEEP_FORMATS.get(args.format)
    if chosen.charts and main is not None:  # the grid as bars: matplotlib, for a format that draws charts only
        charts.insert(0, views.grid_chart(rows, options.axes, args.across))
    if options.table:  # the sweep file's reference table, from the rounds the store holds for this run
        reference = table_cli.sweep_table(store_location(args, log_root), run_id, chosen.charts, options.table)
        if reference is not None:
            table_views.append(reference[0])
            charts.append(reference[1])
    chart = "".join(c for c in charts if c) or None
    report_cli.emit(console, chosen, TablesDocument(f"accelbench sweep {run_id}", table_views, chart), args.output,
                    "--output", end="\n")
    bad = [r for r in rows if r.status in ("failed", "timeout")]
    return EXIT_FAILED if bad else EXIT_OK


def file_and_names(file: Optional[Path], words: list[str]) -> tuple[Optional[Path], list[str]]:
    """The sweep file and the case names: a CASE_NAME argument ending in .yaml or .yml (no case name has one)
    is the sweep file, as --file is (``accelbench sweep configs/sweeps/x.yaml``); one file at most."""
    files = [Path(w) for w in words if w.lower().endswith(SWEEP_FILE_SUFFIXES) and ":" not in w]
    names = [w for w in words if not (w.lower().endswith(SWEEP_FILE_SUFFIXES) and ":" not in w)]
    files = ([file] if file else []) + files
    if len(files) > 1:
        raise UserError(f"two sweep files given: {files[0]} and {files[1]}",
                        "give one sweep file (as the argument or with --file); put every axis in it")
    return (files[0] if files else None), names


def resolve_sweep(log_root: Path, word: str) -> str:
    """A sweep's run id from ``word``: the id itself, ``last`` (the sweep whose state changed last) or a prefix
    only one sweep under the log root has."""
    from run_benchmarks.sweep.state import STATE_FILE

    if word != "last" and (log_root / word / STATE_FILE).is_file():
        return word
    sweeps = [p.parent for p in log_root.glob(f"*/{STATE_FILE}")] if log_root.is_dir() else []
    if word == "last":
        if not sweeps:
            raise UserError(f"no sweep under {log_root}", "start one with accelbench sweep, or give --log-root")
        return max(sweeps, key=lambda d: ((d / STATE_FILE).stat().st_mtime, d.name)).name
    matches = sorted(d.name for d in sweeps if d.name.startswith(word))
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UserError(f"{word!r} names {len(matches)} sweeps under {log_root}: {', '.join(matches[:5])}",
                        "give more of the run id")
    return word  # load() says the folder holds no sweep


def _run_dir(log_root: Path, run_id: str) -> Path:
    component(run_id, "run", "give the folder name of the sweep's run under the log root")
    return log_root / run_id


def _db(args: argparse.Namespace, inputs, log_root: Path) -> StoreLocation:
    return store_location(args, log_root, inputs.test_conf, inputs.test_conf_path, inputs.paths.root)

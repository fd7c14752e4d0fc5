"""``accelbench reference record RUN...``: a loss-curve reference from stored runs of several data seeds.

The runs' ok rounds (one per run and data seed) become ``cases/<case>/loss_reference.yaml``'s curve for
their workload's shape (checks/loss_reference.py); ``--dry-run`` prints it and writes nothing. Checking is
``--check`` on run, sweep and report (checks/loss_check.py).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console

from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import write_text_file
from run_benchmarks.planner.inputs import default_root
from run_benchmarks.results.checks import loss_reference
from run_benchmarks.results.checks.loss_reference import Band, RunCurve
from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.store_options import open_store

MAX_RUNS = 1000  # runs read into one reference


def _band(args: argparse.Namespace, steps: int) -> Band:
    values = {"k": args.k, "floor": args.floor, "max_outside": args.max_outside,
              "mean_rel_error": args.mean_rel_error}
    for name, value in values.items():
        if not math.isfinite(value) or value < 0 or value > 1000:
            raise UserError(f"--{name.replace('_', '-')} {value}: out of range", "give a number from 0 to 1000")
    first = loss_reference.default_first_step(steps) if args.first_step is None else args.first_step
    if not 0 <= first < steps:
        raise UserError(f"--first-step {first}: the runs have {steps} steps", f"give 0 to {steps - 1}")
    try:
        return Band(first_step=first, **values)
    except ValueError as exc:
        raise UserError(f"reference band: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}",
                        "see accelbench reference record --help") from None


def cmd_reference(args: argparse.Namespace, console: Console) -> int:
    root = (args.root or default_root()).resolve()
    if len(args.runs) > MAX_RUNS:
        raise UserError(f"{len(args.runs)} runs given", f"record from at most {MAX_RUNS}")
    with open_store(args) as store:
        run_ids = list(dict.fromkeys(store.resolve_run(r) for r in args.runs))
        attempts = [a for a in store.attempts(run_ids=run_ids) if a.ok]
    if not attempts:
        raise UserError(f"no ok round in run(s) {', '.join(run_ids)}", "list the runs: accelbench runs")
    cases = sorted({str(a.get("case")) for a in attempts})
    if len(cases) > 1:
        raise UserError(f"the runs hold several cases ({', '.join(cases)})", "give runs of one case")
    curves, seen = [], set()
    for attempt in attempts:
        curve = RunCurve(attempt)
        key = (curve.run_id, getattr(curve, "data_seed", None))
        if key not in seen:  # a run's repeats of one seed add no seed noise: its first ok round stands for it
            seen.add(key)
            curves.append(curve)
    steps = next((c.comparable["steps"] for c in curves if not c.problem), 1)
    try:
        curve = loss_reference.record(curves, _band(args, steps))
    except ValueError as exc:
        raise UserError(f"no reference recorded: {exc}", "record from N >= 3 runs of one workload, each with its "
                                                           "own --set data.seed=N") from None
    row = "run " + ", ".join(sorted({str(a.get("run_id")) for a in attempts}))
    path = loss_reference.reference_path(root / "cases", cases[0], row)
    text = loss_reference.dump_yaml(loss_reference.merged(loss_reference.load(root / "cases", cases[0]), curve))
    _print(console, curve, path)
    if args.dry_run:
        console.print(f"--dry-run: {path} not written", markup=False, soft_wrap=True)
        return EXIT_OK
    write_text_file(path, text, "the loss reference")
    console.print(f"wrote {path}: check a run with accelbench report RUN --check", markup=False, soft_wrap=True)
    return EXIT_OK


def _print(console: Console, curve, path: Path) -> None:
    b = curve.band
    console.print(f"loss reference for {curve.describe()} -> {path}", markup=False, soft_wrap=True)
    console.print(f"band from step {b.first_step}: mean ± {b.k:g}·max(std, {b.floor:g}·mean); pass: at most "
                  f"{b.max_outside:.0%} of steps outside, mean relative error <= {b.mean_rel_error:.0%}, loss "
                  f"fell >= {b.min_drop:.0%} of the reference's fall", markup=False, soft_wrap=True)
    console.print("step  mean      std       band half-width", markup=False)
    for s, m, sd in zip(curve.steps, curve.mean, curve.std):
        mark = "" if s >= b.first_step else "  (not checked)"
        console.print(f"{s:>4}  {m:<8.4f}  {sd:<8.4f}  {b.half_width(m, sd):.4f}{mark}", markup=False)

"""``accelbench import``: other tools' logs (and bundles) into the store; the one store command that writes.

A log is imported against a case of this checkout (``--case-name``: accelbench's FLOPs per token, sequence
length and precision apply to it, ``--set`` overrides the case's workload where the log's run differs), or
against none: then only the figures the log states (and those it gives the means for) are stored, under
the model, hardware and layout the log states, or ``--model``/``--hardware``/``--nnodes``/
``--nprocs-per-node`` where it states none. Every file is parsed before anything is stored, so a refusal
(a layout no one gave) leaves the store as it was.
"""
from __future__ import annotations

import argparse
import re
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console

from run_benchmarks.cli import bundle as bundle_cli
from run_benchmarks.catalog import casename
from run_benchmarks.catalog.config import parse_assignment
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import run_id as run_id_name
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.results.report.summary import FIGURE_BY_KEY
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.results.store.faults import StoreError
from run_benchmarks.planner.inputs import default_root

NO_CASE = ("model", "hardware", "nnodes", "nprocs_per_node")


def _known_case(name: casename.CaseName, root: Path) -> None:
    """An import names a case of this checkout, with a framework it declares: its FLOPs and layout come from the
    case, and a typo would otherwise file the rows under a case no report or compare ever pairs."""
    from run_benchmarks.catalog.cases import CaseCatalog
    from run_benchmarks.plan import Paths

    paths = Paths(root)
    catalog = CaseCatalog(paths.cases_dir, paths.vendors_dir)
    known = catalog.names()
    if name.case not in known:
        raise UserError(f"--case-name: no case {name.case!r} under {paths.cases_dir}",
                        f"name one of: {', '.join(known)}; or leave --case-name out to store the log's own figures")
    declared = catalog.resolve(name.case).frameworks
    if declared and name.framework not in declared:
        raise UserError(f"--case-name: case {name.case!r} declares the frameworks {', '.join(declared)}, not "
                        f"{name.framework!r}", f"write one of them, e.g. {name.case}:{declared[0]}:"
                                               f"{name.hardware}:{name.nnodes}:{name.nprocs_per_node}")


def _plain(text, default: str) -> str:
    """A name the log states, as a case name's field takes it (letters, digits, '_', '.', '-')."""
    text = re.sub(r"[^A-Za-z0-9_.\-]+", "_", str(text or "")).strip("_.-")[:casename.MAX_FIELD]
    return text or default


def _log_name(args: argparse.Namespace, stated: dict, fmt: str, path: Path) -> tuple[casename.CaseName, str]:
    """What ran, for an import of no case: the options, else what the log states; and where its layout comes from
    ('' where nothing states one: the row is filed under a 1 x 1 placeholder and no per-device figure is derived,
    since time to train, samples/s and the score need no layout)."""
    nnodes = args.nnodes or stated.get("nnodes")
    nprocs = args.nprocs_per_node or stated.get("nprocs_per_node")
    if bool(nnodes) != bool(nprocs):
        raise UserError(f"{path}: only {'--nnodes' if nnodes else '--nprocs-per-node'} gives a layout, and the log "
                        "states no other half", "give both --nnodes N and --nprocs-per-node P, or neither")
    layout = ("--nnodes/--nprocs-per-node" if args.nnodes and args.nprocs_per_node
              else stated.get("layout_source", "the log") if nnodes else "")
    framework = re.sub(r"[^A-Za-z0-9]", "", fmt.split("/")[0])  # megatron-deepspeed: a case name's framework field
    text = (f"{_plain(args.model or stated.get('model'), 'unknown')}:{framework}:"
            f"{_plain(args.hardware or stated.get('hardware'), 'unknown')}:{nnodes or 1}:{nprocs or 1}")
    return casename.parse(text), layout


def _check_options(args: argparse.Namespace) -> None:
    if args.case_name:
        given = [f"--{k.replace('_', '-')}" for k in NO_CASE if getattr(args, k) is not None]
        if given:
            raise UserError(f"{', '.join(given)} name what ran for an import of no case; --case-name names it here",
                            "leave them out, or leave --case-name out")
    elif args.assignments or args.extern_config:
        raise UserError("--set and --extern-config change a case's workload, and no --case-name names one",
                        "add --case-name, or leave them out to store the log's own figures")
    for key in ("nnodes", "nprocs_per_node"):
        value = getattr(args, key)
        if value is not None and not 1 <= value <= casename.MAXIMA[key][0]:
            raise UserError(f"--{key.replace('_', '-')} {value} is out of range",
                            f"give 1 to {casename.MAXIMA[key][0]}")
    if args.skip_intervals < 0:
        raise UserError(f"--skip-intervals {args.skip_intervals} is negative", "give 0 or more")


# The options that change what an import stores, kept in its run's command (``show``: what was assumed).
STORED_OPTIONS = ("format", "case_name", "extern_config", "vendor", "model", "hardware", "nnodes", "nprocs_per_node",
                  "skip_intervals")


def _command(args: argparse.Namespace) -> list[str]:
    """``accelbench import LOG... --format mllog --case-name ... --set ...``, as the import was asked."""
    argv = ["accelbench", "import", *map(str, args.files)]
    for option in STORED_OPTIONS:
        value = getattr(args, option, None)
        if value is not None:
            argv += [f"--{option.replace('_', '-')}", str(value)]
    return argv + [word for text in args.assignments for word in ("--set", text)]


def _overrides(assignments: list[str]) -> dict:
    """``--set model.seq_len=8192`` -> ``{"model.seq_len": 8192}`` (the value read as ``--set`` reads it)."""
    out = {}
    for text in assignments:
        key, value = text.split("=", 1)[0].strip(), parse_assignment(text)
        for part in key.split("."):
            value = value[part]
        out[key] = value
    return out


def cmd_import(args: argparse.Namespace, console: Console) -> int:
    from run_benchmarks.results.importers import parsers
    from run_benchmarks.results.importers.case_facts import case_facts, complete, hardware_facts

    if bundle_cli.bundles_among(args.files):
        return bundle_cli.cmd_import_bundles(args, console)
    if not args.format:
        raise UserError("import needs --format for a log (only a bundle says what it holds)",
                        f"add --format with one of {', '.join(sorted(parsers.PARSERS))} (the format alone for its "
                        f"newest version), and --case-name {casename.EXAMPLE} "
                        "for accelbench's TFLOP/s and MFU")
    parser = parsers.get(args.format)
    _check_options(args)
    root = (args.root or default_root()).resolve()
    name = facts = None
    if args.case_name:
        name = casename.parse(args.case_name)
        _known_case(name, root)
        facts = case_facts(root, name, args.extern_config, args.assignments)  # FLOPs, sequence, precision, peak
    missing = [str(f) for f in args.files if not f.is_file() and not (f.is_dir() and parser.folder is not None)]
    if missing:
        raise UserError(f"{missing[0]}: file not found" if not Path(missing[0]).is_dir() else
                        f"{missing[0]} is a folder, and --format {parser.name} reads log files",
                        "give the path of a log file to import" + (" (--format mllog also takes a folder of MLPerf "
                                                                   "result files)" if parser.format != "mllog" else ""))
    if args.run_id is not None:
        run_id_name(args.run_id, "--run-id", "use letters, digits, '_', '-' and '.', e.g. mlperf-gpt3-h100")
    parsed, folders = [], []
    for given in args.files:  # all parsed first: a refusal stores nothing
        members = parser.folder.files(given) if given.is_dir() else [given]
        for path in members:
            imported = parser.parse(path, name.world_size if name else None, args.skip_intervals)
            which, layout = (name, "") if name else _log_name(args, imported.stated, parser.name, path)
            before = len(imported.warnings)
            complete(imported, facts or hardware_facts(root, which.hardware),
                     which.world_size if name or layout else None, layout)
            for warning in imported.warnings[before:]:  # the parser's were printed as it read
                print(f"warning: {path}: {warning}", file=sys.stderr)
            parsed.append((path, which, imported))
        if given.is_dir():
            folders.append(parser.folder.score(given, [(p, i) for p, _, i in parsed[-len(members):]]))
    run_id = args.run_id or f"import-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open_store(args, must_exist=False) as store:
        store.begin_run(run_id, now, _command(args), None,
                        str(Path(args.files[0]).resolve().parent), source=f"import:{parser.name}")
        failed = 0  # a log that yields no result is stored (with its reason) but fails the command
        for index, (path, which, imported) in enumerate(parsed, 1):
            failed += imported.status != "ok"
            try:
                store.add_attempt(imported.record(run_id, which, index, args.vendor, args.extern_config, path,
                                                  parser.name, _overrides(args.assignments)).to_row())
            except (StoreError, OverflowError, ValueError, TypeError) as exc:  # a value no column takes
                # The run row is ended, never left ``running`` with no attempt for ever.
                store.end_run(run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"), "aborted")
                raise UserError(f"{path}: a figure of this log does not fit the results store ({type(exc).__name__}: "
                                f"{str(exc)[:200]}); run {run_id} is marked aborted with the attempts before it",
                                "check the log's figures; report the line to accelbench's maintainers") from None
            shown = imported.metrics if imported.status == "ok" else {}  # a failed one's reason names its figures
            console.print(f"{path}: {imported.status}{_headline(shown)}"
                          + (f" — {imported.reason}" if imported.reason else ""), markup=False, soft_wrap=True)
        store.end_run(run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    for line in folders:
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"imported as run {run_id} into {store.where} ({parser.name})", markup=False, soft_wrap=True)
    return EXIT_FAILED if failed else EXIT_OK


def _headline(metrics: dict) -> str:
    """``, 845.3 tokens/s/device, time to train 52.5 min, eval accuracy 2.689``: what the import got (samples/s
    where there are no tokens/s, and every metric the rules score: ``FID 79.13, CLIP 0.1865``)."""
    parts = []
    for key, label in (("tokens_per_s_per_device", " tokens/s/device"), ("tokens_per_s_total", " tokens/s"),
                       ("samples_per_s", " samples/s"), ("time_to_train_s", ""), ("eval_accuracy", "")):
        value = metrics.get(key)
        if value is None or (key in ("tokens_per_s_total", "samples_per_s") and parts):
            continue
        figure = FIGURE_BY_KEY[key]
        scored = metrics.get("eval_metrics") or {}
        if key == "eval_accuracy" and len(scored) > 1:
            parts.append(", ".join(f"{name} {figure.fmt(v)}" for name, v in scored.items()))
        else:
            parts.append(f"{figure.fmt(value)}{label}" if label else f"{figure.label} {figure.fmt(value)}")
    return "".join(f", {p}" for p in parts)

"""``accelbench import``: other tools' logs (and bundles) into the store; the one store command that writes."""
from __future__ import annotations

import argparse
import secrets
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console

from run_benchmarks.cli import bundle as bundle_cli
from run_benchmarks.catalog import casename
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import run_id as run_id_name
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.results.report.summary import FIGURE_BY_KEY
from run_benchmarks.cli.store_options import add_store_options, open_store


def add_command(sub) -> None:
    """Register import on the ``accelbench`` parser."""
    imp = sub.add_parser(
        "import", help="store results from logs other tools wrote (MLPerf MLLOG, Megatron-LM, torchtitan, PaddleNLP)",
        description="Each file becomes one attempt (round 1, 2, ...) of one imported run.")
    imp.add_argument("files", nargs="+", type=Path, metavar="LOG")
    imp.add_argument("--format", metavar="PARSER",  # not for a bundle (accelbench bundle), found by its manifest
                     help="mllog, megatron, torchtitan or paddlenlp (newest version), or pinned: mllog/1, ...")
    imp.add_argument("--case-name", help=f"what ran: {casename.FORMAT}, e.g. "
                                                        "gpt3_6.7B:paddle_2.5.1:A100:1:8")
    imp.add_argument("--extern-config", help="the extern config name the run used, if any")
    imp.add_argument("--vendor", help="the vendor whose references apply (default: none)")
    imp.add_argument("--skip-intervals", type=int, default=1,
                     help="leading logged intervals to treat as warm-up and exclude (default 1)")
    imp.add_argument("--run-id", help="id for the imported run (default: import-<time>-<hex>)")
    add_store_options(imp)


def _known_case(case: str, root: Path) -> None:
    """An import names a case of this checkout: its FLOPs and layout come from the case, and a typo would
    otherwise file the rows under a case no report or compare ever pairs."""
    from run_benchmarks.catalog.cases import CaseCatalog
    from run_benchmarks.plan import Paths

    paths = Paths(root)
    known = CaseCatalog(paths.cases_dir, paths.vendors_dir).names()
    if case not in known:
        raise UserError(f"--case-name: no case {case!r} under {paths.cases_dir}",
                        f"name one of: {', '.join(known)}")


def cmd_import(args: argparse.Namespace, console: Console, default_root) -> int:
    from run_benchmarks.results import importers
    from run_benchmarks.results.importers.case_facts import case_facts, complete

    if bundle_cli.bundles_among(args.files):
        return bundle_cli.cmd_import_bundles(args, console, lambda a, **kw: open_store(a, default_root, **kw))
    if not args.format or not args.case_name:
        raise UserError("import needs --format and --case-name for a log (only a bundle says what it holds)",
                        f"add --format mllog|megatron|torchtitan|paddlenlp --case-name {casename.EXAMPLE}")
    parser = importers.get(args.format)
    name = casename.parse(args.case_name)
    root = (args.root or default_root()).resolve()
    _known_case(name.case, root)
    facts = case_facts(root, name, args.extern_config)  # FLOPs, sequence length, precision, peak
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        raise UserError(f"{missing[0]}: file not found", "give the path of a log file to import")
    if args.skip_intervals < 0:
        raise UserError(f"--skip-intervals {args.skip_intervals} is negative", "give 0 or more")
    if args.run_id is not None:
        run_id_name(args.run_id, "--run-id", "use letters, digits, '_', '-' and '.', e.g. mlperf-gpt3-h100")
    run_id = args.run_id or f"import-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open_store(args, default_root, must_exist=False) as store:
        store.begin_run(run_id, now, ["accelbench", "import", *map(str, args.files)], None,
                        str(Path(args.files[0]).resolve().parent), source=f"import:{parser.name}")
        failed = 0  # a log that yields no result is stored (with its reason) but fails the command
        for index, path in enumerate(args.files, 1):
            imported = parser.parse(path, name.world_size, args.skip_intervals)
            complete(imported, facts, name.world_size)
            failed += imported.status != "ok"
            store.add_attempt(imported.record(run_id, name, index, args.vendor, args.extern_config, path,
                                              parser.name).to_row())
            tok = imported.metrics.get("tokens_per_s_per_device")
            console.print(f"{path}: {imported.status}"
                          + (f", {FIGURE_BY_KEY['tokens_per_s_per_device'].fmt(tok)} tokens/s/device" if tok else "")
                          + (f" — {imported.reason}" if imported.reason else ""), markup=False, soft_wrap=True)
        store.end_run(run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    console.print(f"imported as run {run_id} into {store.path} ({parser.name})", markup=False, soft_wrap=True)
    return EXIT_FAILED if failed else EXIT_OK

"""The commands that read the results store: runs, show, report, compare, import; and store repair."""
from __future__ import annotations

import argparse
import secrets
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import bundle_cli, casename, references
from .config_files import TestConf
from .config import load_model
from .errors import UserError
from .exit_codes import EXIT_FAILED
from .report import export, html, markdown
from .report.compare import Selection, compare
from .report.summary import FIGURE_BY_KEY, summarize
from .report.sweep_views import to_rich
from .report.task_figures import interconnect_line, micro_views
from .report.terminal import checks_table, print_table, human_bytes, print_summaries
from .store import ResultStore, store_path
from .store_faults import StoreCorrupt, process_alive
from .store_schema import FILTER_KEYS

EXIT_OK, EXIT_REGRESSION = 0, 3
FORMATS = ("terminal", "markdown", "html", "json", "csv", "summary-json", "summary-csv")  # json/csv: raw attempts


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, help="results store (default: <log root>/results.db)")
    parser.add_argument("--log-root", type=Path, help="log root holding results.db (default: test_conf log_root)")
    parser.add_argument("--root", type=Path, help="folder with cases/, vendors/, configs/ (default: this checkout)")


def add_commands(sub, default_root) -> None:
    """Register the store commands on the ``accelbench`` parser."""
    runs = sub.add_parser("runs", help="list past runs (newest first)")
    runs.add_argument("--limit", type=int, default=20, help="how many (default 20; 0 for all)")
    add_store_options(runs)

    show = sub.add_parser("show", help="print one run: every attempt with its figures, warnings and environment")
    show.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, or 'last'")
    add_store_options(show)

    report = sub.add_parser(
        "report", help="report runs from the store: terminal, Markdown, HTML, JSON or CSV",
        description="Aggregate stored attempts per case (mean and spread over rounds) and render them.",
        epilog="SELECT: run ids (or prefixes, or 'last') and/or KEY=VALUE filters on "
               f"{', '.join(FILTER_KEYS)}; default: the last run")
    report.add_argument("select", nargs="*", metavar="SELECT")
    report.add_argument("--format", choices=FORMATS, default="terminal")
    report.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    report.add_argument("--check", action="store_true",
                        help="mark each figure pass/fail against the case's and vendor's references.yaml; "
                             f"exit {EXIT_REGRESSION} on a regression")
    add_store_options(report)

    cmp_ = sub.add_parser(
        "compare", help="A against B per matching case, with B's speedup in percent",
        description="Each side is a run (id, prefix, 'last') or comma-separated KEY=VALUE filters, e.g. "
                    "'accelbench compare framework=torch framework=paddle'. Rows pair on what ran: case, framework, "
                    "hardware, model and the layout and batch facts (not the extern config's file name), less "
                    "the keys the two sides filter differently; a change smaller than CV(A) + CV(B) is marked "
                    "'within noise'.")
    cmp_.add_argument("a", metavar="A")
    cmp_.add_argument("b", metavar="B")
    cmp_.add_argument("--format", choices=("terminal", "markdown"), default="terminal")
    cmp_.add_argument("--html", type=Path, metavar="FILE",
                      help="also write the compare as one self-contained HTML page (table and charts) to FILE")
    add_store_options(cmp_)

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

    bundle_cli.add_command(sub, add_store_options)

    store = sub.add_parser("store", help="look after the results store: repair",
                           description="The results store's upkeep.")
    store_sub = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    repair = store_sub.add_parser(
        "repair", help="add the attempts whose results.json the store lacks (never twice); rebuild a damaged store",
        description="Reads every round's results.json under the log root (or the PATHs given) and adds each "
                    "attempt the store does not hold, with its run when the store has lost that too. Attempts "
                    "already stored are recognised and never added twice, so it can run any number of times. "
                    "Runs whose orchestrator is still running are left alone, as are runs started on another "
                    "host. A damaged store is moved aside (results.db.damaged-<time>) and rebuilt.")
    repair.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="results.json files or folders to read (default: the log root)")
    add_store_options(repair)


# ---------------------------------------------------------------- helpers


def log_root_of(args: argparse.Namespace, default_root) -> Path:
    if args.log_root is not None:
        return args.log_root.resolve()
    root = (args.root or default_root()).resolve()
    conf_file = root / "configs" / "test_conf.yaml"
    conf = load_model(TestConf, conf_file) if conf_file.is_file() else TestConf()
    return conf.log_root_in(root)


def open_store(args: argparse.Namespace, default_root, must_exist: bool = True) -> ResultStore:
    path = args.db
    if path is None:
        path = store_path(log_root_of(args, default_root))
    if must_exist and not Path(path).is_file():
        raise UserError(f"no results store at {path}",
                        "run a case first (accelbench run ...), or point --db / --log-root at one")
    return ResultStore(path)


def parse_selection(store: ResultStore, words: Sequence[str]) -> Selection:
    run_ids, filters = [], {}
    for word in (w for text in words for w in text.split(",") if w.strip()):
        if "=" in word:
            key, value = (part.strip() for part in word.split("=", 1))
            if key not in FILTER_KEYS:
                raise UserError(f"cannot select by {key!r}", f"use one of: {', '.join(FILTER_KEYS)}")
            filters[key] = value
        else:
            run_ids.append(store.resolve_run(word.strip()))
    if not run_ids and not filters:
        run_ids.append(store.resolve_run("last"))
    return Selection(" ".join(words) or "last", tuple(run_ids), filters)


def select(store: ResultStore, selection: Selection):
    attempts = store.attempts(selection.filters, selection.run_ids)
    if not attempts:
        raise UserError(f"no attempt matches {selection.text!r} in {store.path}", "list the runs: accelbench runs")
    return attempts


def _write(console: Console, text: str, output: Optional[Path]) -> None:
    if output is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {output}", markup=False, soft_wrap=True)


def run_checks(summaries, root: Path):
    return references.check_all(summaries, root / "cases", root / "vendors")


# ---------------------------------------------------------------- commands


def cmd_runs(args: argparse.Namespace, console: Console, default_root) -> int:
    with open_store(args, default_root) as store:
        rows = store.runs(args.limit or None)
    host = socket.gethostname()
    table = Table(title=f"runs in {store.path}")
    for column in ("run", "started", "status", "attempts", "ok", "cases", "commit", "source"):
        table.add_column(column, no_wrap=column in ("run", "started"))
    for r in rows:
        commit = (r.get("accelbench_commit") or "")[:10]
        table.add_row(r["run_id"], r["started_at"], _status(r, host), str(r["attempts"]), str(r["ok"] or 0),
                      r.get("case_names") or "", commit, r["source"])
    console.print(table)
    return EXIT_OK


def _status(run: dict, host: str) -> str:
    """A running run says where: one on another host cannot be checked from here."""
    if run["status"] != "running" or not run.get("orchestrator_pid"):
        return run["status"]
    if run.get("orchestrator_host") != host:
        return f"running (on {run.get('orchestrator_host')}: not checked from here)"
    alive = process_alive(run["orchestrator_pid"], run.get("orchestrator_started"))
    return f"running (pid {run['orchestrator_pid']})" if alive else "running (orchestrator gone)"


def cmd_show(args: argparse.Namespace, console: Console, default_root) -> int:
    with open_store(args, default_root) as store:
        run_id = store.resolve_run(args.run)
        run = store.run(run_id)
        attempts = store.attempts(run_ids=[run_id])
        allreduce = [a.row for a in store.attempts({"case": "allreduce", "status": "ok"})] \
            if any((a.row.get("nnodes") or 1) > 1 for a in attempts) else []
    console.print(f"[bold]run {run_id}[/] ({run['source']}) {run['status']}: {run['started_at']} -> "
                  f"{run.get('ended_at') or '(not ended)'}", soft_wrap=True)
    if run.get("argv"):
        console.print(f"  command: {' '.join(run['argv'])}", markup=False, soft_wrap=True)
    console.print(f"  accelbench commit: {run.get('accelbench_commit')}; logs: {run.get('log_dir')}",
                  markup=False, soft_wrap=True)
    if run.get("orchestrator_pid"):
        console.print(f"  orchestrator: pid {run['orchestrator_pid']} on {run.get('orchestrator_host')}",
                      markup=False, soft_wrap=True)
    if run.get("note"):
        console.print(f"  note: {run['note']}", markup=False, soft_wrap=True)
    for a in attempts:
        show_record(console, a.record(), a["attempt"], a, allreduce)
    return EXIT_OK


def show_record(console: Console, r, attempt: int, columns, allreduce: Sequence[dict] = ()) -> None:
    """One round record: status, the headline figures (the store's columns, derived from it), task figures,
    warnings, error lines and where each node ran."""
    console.print(f"\n[bold]{escape(r.case_name)}[/] round {r.round} attempt {attempt}: {r.status.value}"
                  + (f" — {escape(r.reason)}" if r.reason else ""), soft_wrap=True)
    if r.case.extern_config:
        console.print(f"  extern config: {r.case.extern_config} (sha256 {str(r.case.extern_config_hash)[:12]})",
                      markup=False, soft_wrap=True)
    if r.workload_hash:
        console.print(f"  workload: {r.workload_hash}", markup=False)
    kind = (r.metrics or {}).get("memory_kind")
    for figure in FIGURE_BY_KEY.values():
        value = columns.get(figure.key)
        if value is not None:
            which = f" ({kind})" if figure.key == "peak_memory_bytes" and kind else ""
            console.print(f"  {figure.label}: {figure.fmt(value)}{which}", markup=False)
    if columns.get("peak_memory_reserved_bytes"):  # the allocator's reserved peak: device memory in use
        console.print(f"  peak memory reserved/device: {human_bytes(columns['peak_memory_reserved_bytes'])}",
                      markup=False)
    if columns.get("memory_total_bytes"):
        console.print(f"  device memory total: {human_bytes(columns['memory_total_bytes'])}", markup=False)
    interconnect = interconnect_line(columns.row, allreduce)
    if interconnect:
        console.print(f"  {interconnect}", markup=False, soft_wrap=True)
    views, rest = micro_views([f.model_dump() for f in r.figures])  # micro-benchmarks' own tables; PPO phases
    for view in views:
        console.print(to_rich(view))
    for figure in rest:
        console.print(f"  {figure.key}: {figure.value:,.4g} {figure.unit}", markup=False, soft_wrap=True)
    for warning in r.warnings:
        console.print(f"  [yellow]warning[/] {escape(warning)}", soft_wrap=True)
    for line in r.error_lines:
        console.print(f"    {line}", markup=False, soft_wrap=True)
    for node in r.environment.nodes:
        env = node.get("environment") or {}
        facts = ", ".join(f"{k}={env[k]}" for k in sorted(env) if not isinstance(env[k], (dict, list)))
        console.print(f"  node {node.get('node_rank')} ({node.get('host')}): {facts}", markup=False, soft_wrap=True)
        if node.get("image"):
            console.print(f"    image: {node['image']} ({node.get('image_id')})", markup=False, soft_wrap=True)
        for key, value in sorted((node.get("probes") or {}).items()):
            first = str(value).splitlines()[0] if value else ""
            console.print(f"    {key}: {first}", markup=False, soft_wrap=True)
    if r.results_path:
        console.print(f"  results: {r.results_path}", markup=False, soft_wrap=True)


def cmd_report(args: argparse.Namespace, console: Console, default_root) -> int:
    root = (args.root or default_root()).resolve()
    with open_store(args, default_root) as store:
        selection = parse_selection(store, args.select)
        attempts = select(store, selection)
    summaries = summarize(attempts)
    checks = run_checks(summaries, root) if args.check else []
    title = f"accelbench report: {selection.text}"
    if args.format == "terminal":
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                print_summaries(Console(file=f, width=160, highlight=False), summaries, title)
            console.print(f"wrote {args.output}", markup=False, soft_wrap=True)
        else:
            print_summaries(console, summaries, title)
    elif args.format == "markdown":
        _write(console, markdown.report(summaries, title), args.output)
    elif args.format == "html":
        _write(console, html.render(title, summaries, attempts, checks), args.output)
    elif args.format == "json":
        _write(console, export.to_json(attempts, root), args.output)
    elif args.format == "summary-json":
        _write(console, export.summary_json(summaries, root), args.output)
    elif args.format == "summary-csv":
        _write(console, export.summary_csv(summaries, root), args.output)
    else:
        _write(console, export.to_csv(attempts, root), args.output)
    return report_checks(console, checks, args.check)


def report_checks(console: Console, checks, asked: bool) -> int:
    if not asked:
        return EXIT_OK
    if not checks:
        console.print("--check: no reference matches these cases (add references.yaml to the case or vendor)")
        return EXIT_OK
    print_table(console, checks_table(checks))
    failed = [c for c in checks if not c.passed]
    if failed:
        console.print(f"[red]{len(failed)} of {len(checks)} figure(s) outside their reference band[/]")
        return EXIT_REGRESSION
    console.print(f"[green]all {len(checks)} figure(s) within their reference band[/]")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace, console: Console, default_root) -> int:
    with open_store(args, default_root) as store:
        a, b = parse_selection(store, [args.a]), parse_selection(store, [args.b])
        rows = compare(a, b, select(store, a), select(store, b))
    if args.html is not None:
        if not args.html.parent.is_dir():
            raise UserError(f"--html {args.html}: no folder {args.html.parent}", "create it, or name a file in a folder")
        args.html.write_text(html.render_compare(a, b, rows), encoding="utf-8")
        console.print(f"wrote {args.html}", markup=False, soft_wrap=True)
    if args.format == "markdown":
        console.print(markdown.compare_table(a, b, rows), markup=False, highlight=False, soft_wrap=True, end="")
        return EXIT_OK
    from .report.terminal import compare_table

    print_table(console, compare_table(a, b, rows))
    return EXIT_OK


def _known_case(case: str, root: Path) -> None:
    """An import names a case of this checkout: its FLOPs and layout come from the case, and a typo would
    otherwise file the rows under a case no report or compare ever pairs."""
    from .cases import CaseCatalog
    from .plan import Paths

    paths = Paths(root)
    known = CaseCatalog(paths.cases_dir, paths.vendors_dir).names()
    if case not in known:
        raise UserError(f"--case-name: no case {case!r} under {paths.cases_dir}",
                        f"name one of: {', '.join(known)}")


def cmd_import(args: argparse.Namespace, console: Console, default_root) -> int:
    from . import importers
    from .importers.case_facts import case_facts, complete

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


def cmd_store(args: argparse.Namespace, console: Console, default_root) -> int:
    """``store repair``: the attempts results.json files hold that the store lacks, added once."""
    path = (args.db or store_path(log_root_of(args, default_root))).resolve()
    if args.paths:
        folders = [p.resolve() for p in args.paths]
    elif args.db is not None and args.log_root is None:
        folders = [path.parent]  # the default layout: the store beside the run folders
    else:
        folders = [log_root_of(args, default_root)]
    missing = [str(f) for f in folders if not f.exists()]
    if missing:
        raise UserError(f"{missing[0]}: no such file or folder", "give the log root (--log-root) or results.json paths")
    try:
        store = ResultStore(path)
    except StoreCorrupt as exc:
        aside = path.with_name(f"{path.name}.damaged-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{path}{suffix}")
            if part.exists():
                part.rename(Path(f"{aside}{suffix}"))
        console.print(f"{exc.message}\nmoved it aside to {aside}; rebuilding {path} from results.json",
                      markup=False, soft_wrap=True)
        store = ResultStore(path)
    with store:
        lines = store.repair(folders)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"repaired {path} from {', '.join(map(str, folders))}", markup=False, soft_wrap=True)
    return EXIT_OK


def cmd_bundle(args: argparse.Namespace, console: Console, default_root) -> int:
    return bundle_cli.cmd_bundle(args, console, lambda a: open_store(a, default_root))


COMMANDS = {"bundle": cmd_bundle, "store": cmd_store, "runs": cmd_runs, "show": cmd_show, "report": cmd_report, "compare": cmd_compare, "import": cmd_import}


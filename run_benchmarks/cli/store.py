"""``accelbench store repair`` and ``store copy``: the results store's upkeep, on either engine."""
from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.cli.store_options import log_root_of, store_location
from run_benchmarks.errors import UserError
from run_benchmarks.results.store.faults import StoreCorrupt
from run_benchmarks.results.store.store import ResultStore


def cmd_store(args: argparse.Namespace, console: Console) -> int:
    if args.store_command == "copy":
        return cmd_copy(args, console)
    return cmd_repair(args, console)


def cmd_repair(args: argparse.Namespace, console: Console) -> int:
    """``store repair``: the attempts results.json files hold that the store lacks, added once."""
    where = store_location(args).resolved()
    if args.paths:
        folders = [p.resolve() for p in args.paths]
    elif args.db is not None and args.log_root is None and where.path is not None:
        folders = [where.path.parent]  # the default layout: the store beside the run folders
    else:
        folders = [log_root_of(args)]
    missing = [str(f) for f in folders if not f.exists()]
    if missing:
        raise UserError(f"{missing[0]}: no such file or folder", "give the log root (--log-root) or results.json paths")
    try:
        store = ResultStore(where)
    except StoreCorrupt as exc:  # a damaged SQLite file: a server's database is never moved aside
        path = where.path
        aside = path.with_name(f"{path.name}.damaged-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{path}{suffix}")
            if part.exists():
                part.rename(Path(f"{aside}{suffix}"))
        console.print(f"{exc.message}\nmoved it aside to {aside}; rebuilding {path} from results.json",
                      markup=False, soft_wrap=True)
        store = ResultStore(where)
    with store:
        lines = store.repair(folders)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"repaired {where} from {', '.join(map(str, folders))}", markup=False, soft_wrap=True)
    return EXIT_OK


def cmd_copy(args: argparse.Namespace, console: Console) -> int:
    """``store copy FROM TO``: every run and attempt FROM holds that TO lacks (results/store/copy.py)."""
    from run_benchmarks.results.store.copy import copy_store

    source, target = args.source.resolved(), args.target.resolved()
    if not source.exists():
        raise UserError(f"no results store at {source}", "give the store to copy from: a results.db file or a "
                                                         "postgresql:// URL")
    with ResultStore(source, reader=True, finalize=False) as old, ResultStore(target) as new:
        lines = copy_store(old, new)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    return EXIT_OK

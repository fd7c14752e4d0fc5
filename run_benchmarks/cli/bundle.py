"""``accelbench bundle RUN`` and the bundle half of ``accelbench import`` (bundle/archive.py does the work)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from run_benchmarks.results.bundle.archive import import_bundle, is_bundle, write_bundle
from run_benchmarks.errors import UserError
from run_benchmarks.cli.store_options import log_root_of, open_store


def cmd_bundle(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        path, manifest = write_bundle(store, args.run, args.output)
    console.print(f"wrote {path}: run {manifest.run_id}, {manifest.attempts} attempt(s), {manifest.files} file(s) "
                  "of its folder, SHA-256 of each in SHA256SUMS", markup=False, soft_wrap=True)
    return 0


def bundles_among(files: list[Path]) -> bool:
    """True when every file is a bundle; a mix with logs is refused (the logs need --format and --case-name)."""
    found = [is_bundle(f) for f in files]
    if any(found) and not all(found):
        raise UserError("import got both bundles and logs", "import the bundles and the logs in separate commands")
    return bool(found) and all(found)


def cmd_import_bundles(args: argparse.Namespace, console: Console) -> int:
    """Into the store --db names (or the log root's), the run folder under that store's log root."""
    with open_store(args, must_exist=False) as store:
        log_root = (args.log_root.resolve() if args.log_root is not None else
                    store.path.resolve().parent if store.path is not None else log_root_of(args))
        for path in args.files:
            console.print(import_bundle(path, store, log_root), markup=False, soft_wrap=True)
    return 0

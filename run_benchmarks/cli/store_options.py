"""Which results store a command opens (--db, --log-root, --root: arguments.add_store_options): shared by the
store commands' modules."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from run_benchmarks.catalog.config_files import TestConf
from run_benchmarks.catalog.config import load_model
from run_benchmarks.errors import UserError
from run_benchmarks.planner.inputs import default_root
from run_benchmarks.results.store.store import ResultStore, store_path


def log_root_of(args: argparse.Namespace) -> Path:
    if args.log_root is not None:
        return args.log_root.resolve()
    root = (args.root or default_root()).resolve()
    conf_file = root / "configs" / "test_conf.yaml"
    conf = load_model(TestConf, conf_file) if conf_file.is_file() else TestConf()
    return conf.log_root_in(root)


def open_store(args: argparse.Namespace, must_exist: bool = True) -> ResultStore:
    """``must_exist``: a reading command (runs, show, report, compare, bundle): the store is never created, and
    one that cannot be written (read-only media, an archive of another user) is opened read-only, which it
    says on stderr. Otherwise a writing command (import): the store is made if missing."""
    path = args.db
    if path is None:
        path = store_path(log_root_of(args))
    if must_exist and not os.path.lexists(path):
        raise UserError(f"no results store at {path}",
                        "run a case first (accelbench run ...), or point --db / --log-root at one")
    return ResultStore(path, reader=must_exist)

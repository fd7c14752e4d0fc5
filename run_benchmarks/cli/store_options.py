"""Which results store a command opens (--db, test_conf's ``db:``, --log-root, --root:
arguments.add_store_options): shared by the store commands' modules. --db wins over test_conf's db, which wins
over <log root>/results.db."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from run_benchmarks.catalog.config_files import TestConf
from run_benchmarks.catalog.config import load_model
from run_benchmarks.errors import UserError
from run_benchmarks.planner.inputs import default_root
from run_benchmarks.results.store import location
from run_benchmarks.results.store.location import LocationError, StoreLocation
from run_benchmarks.results.store.store import ResultStore, store_path


def conf_db(conf: TestConf, conf_file: Path, root: Path) -> Optional[StoreLocation]:
    """test_conf's ``db:`` (a relative file path is inside the checkout, as log_root is)."""
    if conf.db is None:
        return None
    try:
        return location.parse(conf.db, base=root)
    except LocationError as exc:
        raise UserError(f"{conf_file}: db: {exc.message}", exc.fix) from None


def _conf(args: argparse.Namespace) -> tuple[TestConf, Path, Path]:
    root = (args.root or default_root()).resolve()
    conf_file = root / "configs" / "test_conf.yaml"
    return (load_model(TestConf, conf_file) if conf_file.is_file() else TestConf()), conf_file, root


def log_root_of(args: argparse.Namespace) -> Path:
    if args.log_root is not None:
        return args.log_root.resolve()
    conf, _, root = _conf(args)
    return conf.log_root_in(root)


def store_location(args: argparse.Namespace, log_root: Optional[Path] = None, conf: Optional[TestConf] = None,
                   conf_file: Optional[Path] = None, root: Optional[Path] = None) -> StoreLocation:
    """The store a command names: --db, else test_conf's db, else ``log_root``/results.db (``log_root`` and the
    test_conf given by a command that loaded them, else read here)."""
    if args.db is not None:
        return args.db
    if conf is None:
        conf, conf_file, root = _conf(args)
    return conf_db(conf, conf_file, root) or location.file(store_path(log_root or log_root_of(args)))


def open_store(args: argparse.Namespace, must_exist: bool = True) -> ResultStore:
    """``must_exist``: a reading command (runs, show, report, compare, bundle): the store is never created, and
    one that cannot be written (read-only media, an archive of another user) is opened read-only, which it
    says on stderr. Otherwise a writing command (import): the store is made if missing."""
    where = store_location(args)
    if must_exist and not where.exists():
        raise UserError(f"no results store at {where}",
                        "run a case first (accelbench run ...), or point --db / --log-root at one")
    return ResultStore(where, reader=must_exist)

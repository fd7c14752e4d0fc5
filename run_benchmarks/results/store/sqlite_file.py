"""The SQLite engine: a store that is one file. Opening it (refusing what is not a store, the integrity check,
a read-only open of a store this process cannot write), making a new one whole, and its connection: SQLite's
busy timeout and ``BEGIN IMMEDIATE`` as the write lock, its errors told apart (faults.is_locked, is_full).
See store.py for the faults and what is refused (tests/test_store_faults.py, tests/test_store_hostile.py)."""
from __future__ import annotations

import errno
import os
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import fsync_folder
from run_benchmarks.results.store.clock import SCAN_BUDGET_S, WAIT_ENV
from run_benchmarks.results.store.connection import Connection, Result
from run_benchmarks.results.store.dialect import SQLITE
from run_benchmarks.results.store.faults import (StoreCorrupt, StoreError, StoreUnavailable, is_full, is_locked,
                                                 locked_fix)
from run_benchmarks.results.store.files import empty_file_error, file_size, held_by_another, write_blocked
from run_benchmarks.results.store.schema import add_missing_columns, check_version, create_schema

_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


class SqliteConnection(Connection):
    dialect = SQLITE

    def __init__(self, target: str, where: str, wait_s: float, uri: bool = False):
        super().__init__()
        self.where, self.wait_s = where, wait_s
        self.raw = sqlite3.connect(target, uri=uri, timeout=wait_s, isolation_level=None)
        self.raw.row_factory = sqlite3.Row

    def _execute(self, sql: str, params: Optional[tuple]) -> Result:
        cursor = self.raw.execute(sql, params or ())
        return Result(cursor.fetchall() if cursor.description else [], cursor.lastrowid)

    def _error(self, exc: Exception) -> Optional[StoreError]:
        if not isinstance(exc, sqlite3.Error):
            return None
        text = str(exc)
        kind = ("locked" if is_locked(exc) else "full" if is_full(exc) else
                "damaged" if isinstance(exc, _Damaged) or "malformed" in text or "corrupt" in text else "other")
        return StoreError(text, kind)

    def _begin(self, wait_s: float) -> None:
        self.raw.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        self.raw.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        self.raw.close()


class _Damaged(sqlite3.DatabaseError):
    """The integrity check found a problem."""


def open_file(store: Any, reader: bool) -> SqliteConnection:
    """The store's connection; ``store.read_only`` says why a reader opened it read-only (None: to write)."""
    path = store.path
    size = file_size(path)
    if size is None:
        if reader:
            raise UserError(f"no results store at {path}",
                            "run a case first (accelbench run ...), or point --db / --log-root at one")
        _create(path)
    elif size == 0 and not held_by_another(path):
        raise empty_file_error(path, reader)  # held: being made by another process, waited for as a lock
    blocked = write_blocked(path)
    if blocked and not reader:
        raise UserError(f"the results store {path} cannot be written: {blocked}",
                        "copy it (with any -wal file beside it) to a writable folder and point --db at the copy, "
                        "or point --db at another file; runs, show and report can read it where it is")
    if blocked:
        return _open_read_only(store, blocked)
    conn = SqliteConnection(str(path), str(path), store.wait_s)
    try:
        _check_integrity(conn.raw)  # before anything writes to a file that may be damaged
        conn.raw.execute("PRAGMA journal_mode=WAL")  # readers never block the run that writes
        conn.raw.execute("PRAGMA synchronous=FULL")
        create_schema(conn)
        check_version(conn)
        add_missing_columns(conn)
    except (sqlite3.DatabaseError, StoreError) as exc:
        conn.close()
        raise open_error(store, exc) from None
    return conn


def open_error(store: Any, exc: Exception) -> UserError:
    path = store.path
    if is_locked(exc):
        return StoreUnavailable(f"the results store {path} is locked: another process has held a write "
                                f"transaction on it for more than {store.wait_s:g} s", locked_fix(path, WAIT_ENV))
    if is_full(exc):
        return StoreUnavailable(f"the results store {path} cannot be written: the disk is full",
                                "free space on its file system, or point --db at another file")
    if "malformed" in str(exc) or "corrupt" in str(exc) or isinstance(exc, _Damaged) \
            or getattr(exc, "kind", "") == "damaged":
        where = (f"copy it to a writable folder, then rebuild the copy: accelbench store repair --db COPY "
                 f"--log-root {path.parent}" if store.read_only else
                 f"rebuild it from the runs' results.json files: accelbench store repair --db {path} "
                 f"--log-root {path.parent} (it first moves the damaged file aside to "
                 f"{path.name}.damaged-<time>; or move it yourself)")
        return StoreCorrupt(f"the results store {path} is damaged: {exc}",
                            f"{where}; runs brought in with `accelbench import` must be imported again")
    return UserError(f"{path} is not an accelbench results store: {exc}",
                     "point --db (or the log root) at another file, or move this one away")


def _create(path: Path) -> None:
    """A new store is made whole in a temporary file beside ``path`` and linked into place, so that the
    path never shows an empty or half-made store: an empty file there is never one of ours (see
    files.empty_file_error). When another process made the store first, its file is kept and this one dropped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        conn = SqliteConnection(str(tmp), str(tmp), 5.0)
        try:
            conn.raw.execute("PRAGMA journal_mode=WAL")
            conn.raw.execute("PRAGMA synchronous=FULL")
            create_schema(conn)
            check_version(conn)
        finally:
            conn.close()  # the last connection: the WAL is merged into the file and removed
        try:
            os.link(tmp, path)  # never replaces: a store another process just made stays
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            if not os.path.lexists(path):  # a file system without hard links
                os.replace(tmp, path)
        fsync_folder(path.parent)
    except (sqlite3.DatabaseError, StoreError, OSError) as exc:
        if is_full(exc):
            raise StoreUnavailable(f"the results store {path} cannot be created: the disk is full",
                                   "free space on its file system, or point --db at another file") from None
        raise UserError(f"the results store {path} cannot be created: {exc}",
                        "point --db (or --log-root) at a folder you can write to") from None
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{tmp}{suffix}")
            except OSError:
                pass


def _open_read_only(store: Any, why: str) -> SqliteConnection:
    """A reader's open of a store it cannot write (read-only media, another user's archive): SQLite's
    ``mode=ro``, which reads the -wal file too but needs its -shm file to exist or be creatable; else
    ``immutable=1``, which reads the main file alone (the store is then taken not to change while read).
    Nothing is written: no migration (missing columns read as NULL through temporary views), no
    finalizing of dead runs. Said on stderr, with what a -wal file that cannot be read would hide."""
    path = store.path
    store.read_only = why
    uri = "file:" + quote(str(path.resolve()))
    immutable = False
    for query in ("mode=ro", "mode=ro&immutable=1"):
        immutable = "immutable" in query
        conn = SqliteConnection(f"{uri}?{query}", str(path), store.wait_s, uri=True)
        try:
            conn.raw.execute("SELECT count(*) FROM sqlite_master").fetchone()
            break
        except sqlite3.DatabaseError as exc:
            conn.close()
            if immutable or is_locked(exc) or not isinstance(exc, sqlite3.OperationalError):
                raise open_error(store, exc) from None
    try:
        _check_integrity(conn.raw)
        if not {"meta", "runs", "attempts"} <= conn.names():
            raise sqlite3.DatabaseError("it has no meta, runs and attempts tables")
        check_version(conn, write=False)
        add_missing_columns(conn, write=False)
    except (sqlite3.DatabaseError, StoreError) as exc:
        conn.close()
        raise open_error(store, exc) from None
    note = f"the results store {path} is read-only ({why}): opened read-only"
    if immutable:
        note += " as immutable (SQLite cannot make its -wal and -shm files there)"
    note += "; nothing is written to it, runs whose orchestrator died are not finalized from here"
    wal = Path(f"{path}-wal")
    if immutable and wal.is_file() and wal.stat().st_size > 0:
        note += (f". WARNING: {wal} ({wal.stat().st_size} bytes) holds changes not yet merged into the store, "
                 f"which cannot be read from here: copy {path.name} and {wal.name} together to a writable "
                 "folder and read the copy")
    store.announce(note)
    return conn


def _check_integrity(conn: sqlite3.Connection) -> None:
    """quick_check walks every page of every b-tree; reading every row then decodes every record, which
    catches garbage inside a page whose structure still holds. The row scan stops after SCAN_BUDGET_S."""
    problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise _Damaged("; ".join(p.replace("\n", " ") for p in problems))
    deadline = time.monotonic() + SCAN_BUDGET_S
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        cursor = conn.execute(f'SELECT * FROM "{table}"')
        while cursor.fetchmany(500):
            if time.monotonic() > deadline:
                return

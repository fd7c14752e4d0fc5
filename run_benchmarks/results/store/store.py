"""The results store: one SQLite file under the log root, one row per attempt.

Every attempt of every round is a row, failures included (status ok, failed, oom,
unsupported, timeout, interrupted, start_error), written in its own transaction as
soon as the round ends: a run killed with SIGKILL leaves every finished attempt
readable. No server; ``sqlite3`` is in the standard library. Headline figures
are columns (so they can be filtered and sorted); the complete metrics, the
workload, the environment and the warnings are JSON beside them.

Faults the store meets and what it does (tests/test_store_faults.py):

- another process holds a write transaction: every write waits (SQLite's busy timeout) and is retried with
  backoff for a bounded time ($ACCELBENCH_STORE_WAIT_S at open and for the run's own row, default 30 s;
  $ACCELBENCH_STORE_RETRY_S for an attempt, default 120 s), then gives up with ``StoreUnavailable``;
- a damaged file: refused at open (quick_check, then every row of every table read) with ``StoreCorrupt``;
- a run whose orchestrator died (SIGKILL, a crash, a reboot) stays ``running``: whoever opens the store next on
  the orchestrator's host finds the process gone (pid and start time, since pids are reused), adds the attempts
  its results.json files hold that never reached the store, and marks the run ``killed`` (``done`` when the run
  had written its summary.json: it ended, only its end was not recorded; ``aborted`` when that summary.json is
  empty or unreadable: it reached its end on a full disk). A run started on another host is left alone: its
  process cannot be looked at from here;
- ``repair`` adds the attempts of results.json files the store lacks, never twice: the way back after any of
  the above, and the way to rebuild a store that had to be moved aside.

What it refuses or reads with care (tests/test_store_hostile.py):

- a path that is not a regular file (``--db /dev/null``, a folder, a pipe): refused with what it is;
- an empty (0-byte) file: never a store, since a new store is made whole in a temporary file and linked into
  place. Reading commands refuse it ("empty file, not a results store"); writing ones refuse it as damaged
  (``StoreCorrupt``), so ``store repair`` moves it aside and rebuilds. Unless another process holds an SQLite
  lock on it: then it is a store being made (by an sqlite3 shell, an older accelbench), waited for as a lock;
- a store this process cannot write (read-only media, another user's archive): a reading command
  (``reader=True``: runs, show, report, compare, bundle) opens it with SQLite's ``mode=ro``, or with
  ``immutable=1`` when its -wal/-shm files cannot be made there, says so on stderr and writes nothing; a
  writing command is refused with the way out (a copy);
- two runs at once on one machine: each round's row names the other runs whose orchestrator ran here during
  it (``overlapping_runs``), whichever run started first.

summary.json and results.json are to be written with ``pathnames.write_text_atomically`` (temporary file, fsync,
rename): a full disk then leaves the old file or none, never an empty one.

Over 300 lines: opening (refusing whatever is not a store), writing under locks with retries and reading
are one job; recovery, overlap warnings, the clock and the file checks are modules beside it.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence
from urllib.parse import quote

from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import fsync_folder
from run_benchmarks.results.store.faults import (StoreCorrupt, StoreUnavailable, is_full, is_locked, locked_fix)
from run_benchmarks.results.store.clock import (DEFAULT_RETRY_S, DEFAULT_WAIT_S, RETRY_ENV, SCAN_BUDGET_S,
                                              WAIT_ENV, seconds_from_env)
from run_benchmarks.results.store.files import empty_file_error, file_size, held_by_another, write_blocked
from run_benchmarks.results.store.overlap import overlapping_runs
from run_benchmarks.results.store.recovery import StoreRecovery
from run_benchmarks.results.store.schema import (FILTER_KEYS, Attempt, _decode, _insert_attempt, add_missing_columns, check_version, create_schema)

DB_NAME = "results.db"

_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


def _stderr(message: str) -> None:
    print(f"accelbench: {message}", file=sys.stderr, flush=True)


class ResultStore(StoreRecovery):
    """``wait_s``: how long opening and the run's own row wait for a lock; ``retry_s``: how long an attempt's
    write is retried; ``finalize``: finalize this host's runs whose orchestrator is gone; ``announce``: where
    notes go (stderr)."""

    def __init__(self, path: Path, wait_s: Optional[float] = None, retry_s: Optional[float] = None,
                 finalize: bool = True, announce: Optional[Callable[[str], None]] = None, reader: bool = False):
        self.path = Path(path)
        self.wait_s = seconds_from_env(WAIT_ENV, DEFAULT_WAIT_S) if wait_s is None else wait_s
        self.retry_s = seconds_from_env(RETRY_ENV, DEFAULT_RETRY_S) if retry_s is None else retry_s
        self.announce = announce or _stderr
        self.unstored: list[str] = []  # what this process could not write (attempts, the run's end)
        self.finalized: list[str] = []  # notes on the runs this open finalized
        self.read_only: Optional[str] = None  # why a reader opened the store read-only; None: opened to write
        size = file_size(self.path)
        if size is None:
            if reader:
                raise UserError(f"no results store at {self.path}",
                                "run a case first (accelbench run ...), or point --db / --log-root at one")
            self._create()
        elif size == 0 and not held_by_another(self.path):
            raise empty_file_error(self.path, reader)  # held: being made by another process, waited for as a lock
        blocked = write_blocked(self.path)
        if blocked and not reader:
            raise UserError(f"the results store {self.path} cannot be written: {blocked}",
                            "copy it (with any -wal file beside it) to a writable folder and point --db at the copy, "
                            "or point --db at another file; runs, show and report can read it where it is")
        if blocked:
            self._open_read_only(blocked)
        else:
            self._open()
        if finalize and self.read_only is None:
            self.finalize_dead_runs()

    def _open(self) -> None:
        self.conn = sqlite3.connect(self.path, timeout=self.wait_s, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            self._check_integrity()  # before anything writes to a file that may be damaged
            self.conn.execute("PRAGMA journal_mode=WAL")  # readers never block the run that writes
            self.conn.execute("PRAGMA synchronous=FULL")
            create_schema(self.conn)
            check_version(self.conn)
            add_missing_columns(self.conn)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise self._open_error(exc) from None

    def _open_error(self, exc: sqlite3.DatabaseError) -> UserError:
        if is_locked(exc):
            return StoreUnavailable(f"the results store {self.path} is locked: another process has held a write "
                                    f"transaction on it for more than {self.wait_s:g} s",
                                    locked_fix(self.path, WAIT_ENV))
        if is_full(exc):
            return StoreUnavailable(f"the results store {self.path} cannot be written: the disk is full",
                                    "free space on its file system, or point --db at another file")
        if "malformed" in str(exc) or "corrupt" in str(exc) or isinstance(exc, _Damaged):
            where = (f"copy it to a writable folder, then rebuild the copy: accelbench store repair --db COPY "
                     f"--log-root {self.path.parent}" if self.read_only else
                     f"rebuild it from the runs' results.json files: accelbench store repair --db {self.path} "
                     f"--log-root {self.path.parent} (it first moves the damaged file aside to "
                     f"{self.path.name}.damaged-<time>; or move it yourself)")
            return StoreCorrupt(f"the results store {self.path} is damaged: {exc}",
                                f"{where}; runs brought in with `accelbench import` must be imported again")
        return UserError(f"{self.path} is not an accelbench results store: {exc}",
                         "point --db (or the log root) at another file, or move this one away")

    def _create(self) -> None:
        """A new store is made whole in a temporary file beside ``path`` and linked into place, so that the
        path never shows an empty or half-made store: an empty file there is never one of ours (see
        files.empty_file_error). When another process made the store first, its file is kept and this one dropped."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                create_schema(conn)
                check_version(conn)
            finally:
                conn.close()  # the last connection: the WAL is merged into the file and removed
            try:
                os.link(tmp, self.path)  # never replaces: a store another process just made stays
            except FileExistsError:
                pass
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINKS:
                    raise
                if not os.path.lexists(self.path):  # a file system without hard links
                    os.replace(tmp, self.path)
            fsync_folder(self.path.parent)
        except (sqlite3.DatabaseError, OSError) as exc:
            if is_full(exc):
                raise StoreUnavailable(f"the results store {self.path} cannot be created: the disk is full",
                                       "free space on its file system, or point --db at another file") from None
            raise UserError(f"the results store {self.path} cannot be created: {exc}",
                            "point --db (or --log-root) at a folder you can write to") from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(f"{tmp}{suffix}")
                except OSError:
                    pass

    def _open_read_only(self, why: str) -> None:
        """A reader's open of a store it cannot write (read-only media, another user's archive): SQLite's
        ``mode=ro``, which reads the -wal file too but needs its -shm file to exist or be creatable; else
        ``immutable=1``, which reads the main file alone (the store is then taken not to change while read).
        Nothing is written: no migration (missing columns read as NULL through temporary views), no
        finalizing of dead runs. Said on stderr, with what a -wal file that cannot be read would hide."""
        self.read_only = why
        uri = "file:" + quote(str(self.path.resolve()))
        immutable = False
        for query in ("mode=ro", "mode=ro&immutable=1"):
            immutable = "immutable" in query
            self.conn = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=self.wait_s, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            try:
                self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                break
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                if immutable or is_locked(exc) or not isinstance(exc, sqlite3.OperationalError):
                    raise self._open_error(exc) from None
        try:
            self._check_integrity()
            tables = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "runs", "attempts"} <= tables:
                raise sqlite3.DatabaseError("it has no meta, runs and attempts tables")
            check_version(self.conn, write=False)
            add_missing_columns(self.conn, write=False)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise self._open_error(exc) from None
        note = f"the results store {self.path} is read-only ({why}): opened read-only"
        if immutable:
            note += " as immutable (SQLite cannot make its -wal and -shm files there)"
        note += "; nothing is written to it, runs whose orchestrator died are not finalized from here"
        wal = Path(f"{self.path}-wal")
        if immutable and wal.is_file() and wal.stat().st_size > 0:
            note += (f". WARNING: {wal} ({wal.stat().st_size} bytes) holds changes not yet merged into the store, "
                     f"which cannot be read from here: copy {self.path.name} and {wal.name} together to a writable "
                     "folder and read the copy")
        self.announce(note)

    def _check_integrity(self) -> None:
        """quick_check walks every page of every b-tree; reading every row then decodes every record, which
        catches garbage inside a page whose structure still holds. The row scan stops after SCAN_BUDGET_S."""
        problems = [row[0] for row in self.conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise _Damaged("; ".join(p.replace("\n", " ") for p in problems))
        deadline = time.monotonic() + SCAN_BUDGET_S
        tables = [row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cursor = self.conn.execute(f'SELECT * FROM "{table}"')
            while cursor.fetchmany(500):
                if time.monotonic() > deadline:
                    return

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def _write(self, work: Callable[[sqlite3.Cursor], Any], budget_s: float, env: str, what: str) -> Any:
        """``work`` inside one BEGIN IMMEDIATE transaction; while another process holds the lock, waited for
        and retried with backoff until ``budget_s`` has passed, then StoreUnavailable. Other errors (a full
        disk, a damaged file) are raised at once: waiting does not mend them."""
        began = time.monotonic()
        pause, told = 0.25, False
        while True:
            left = budget_s - (time.monotonic() - began)
            # The first wait is short, so a wait of any length is announced; later ones let SQLite retry.
            self.conn.execute(f"PRAGMA busy_timeout = {int(max(0.0, min(left, 5.0 if told else 1.0)) * 1000)}")
            cur = self.conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    value = work(cur)
                    cur.execute("COMMIT")
                except BaseException:
                    if self.conn.in_transaction:
                        try:
                            cur.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise
                return value
            except sqlite3.OperationalError as exc:
                if not is_locked(exc):
                    raise
                left = budget_s - (time.monotonic() - began)
                if left <= 0:
                    failure = StoreUnavailable(f"the results store {self.path} is locked: another process has held "
                                               f"a write transaction on it for more than {budget_s:g} s, so {what} "
                                               "could not be written", locked_fix(self.path, env))
                    failure.reason = f"locked by another process for more than {budget_s:g} s"
                    raise failure from None
                if not told:
                    told = True
                    self.announce(f"the results store {self.path} is locked by another process; retrying {what} "
                                  f"for up to {budget_s:g} s")
                time.sleep(min(pause, left))
                pause = min(pause * 2, 8.0)

    def _transaction(self, sql: str, params: Sequence, budget_s: Optional[float] = None,
                     what: str = "a row", env: str = RETRY_ENV) -> int:
        def work(cur: sqlite3.Cursor) -> int:
            cur.execute(sql, params)
            return cur.lastrowid
        return self._write(work, self.retry_s if budget_s is None else budget_s, env, what)

    def begin_run(self, run_id: str, started_at: str, argv: Sequence[str], commit: Optional[str],
                  log_dir: Optional[str], source: str = "accelbench",
                  orchestrator: Optional[tuple[str, int, float]] = None) -> None:
        """``orchestrator``: (host, pid, start time) of the process that will end the run (see
        orchestrator_identity); a run without one is never finalized by someone else."""
        host, pid, started = orchestrator or (None, None, None)
        self._transaction("INSERT OR REPLACE INTO runs (run_id, started_at, status, argv, accelbench_commit, "
                          "log_dir, source, orchestrator_host, orchestrator_pid, orchestrator_started) "
                          "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                          (run_id, started_at, json.dumps(list(argv)), commit, log_dir, source, host, pid, started),
                          self.wait_s, f"run {run_id}", WAIT_ENV)

    def end_run(self, run_id: str, ended_at: str, status: str = "done") -> None:
        self._transaction("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?", (ended_at, status, run_id),
                          self.retry_s, f"the end of run {run_id}")

    def add_attempt(self, fields: dict, what: str = "the attempt") -> int:
        """``fields``: CASE_COLUMNS, run_id, round, status, ... and ``metrics`` as a dict (or None). The other
        runs that ran on this machine during the attempt (overlapping_runs) are added to its warnings."""
        overlaps = overlapping_runs(self.conn, fields)
        if overlaps:
            fields = {**fields, "warnings": [*(fields.get("warnings") or []), *overlaps]}
            if isinstance(fields.get("record"), dict):
                fields["record"] = {**fields["record"], "warnings": list(fields["warnings"])}
        sql, params = _insert_attempt(fields)
        return self._transaction(sql, params, self.retry_s, what)

    # ------------------------------------------------------------ reading

    def runs(self, limit: Optional[int] = None) -> list[dict]:
        sql = ("SELECT r.*, COUNT(a.id) AS attempts, SUM(a.status = 'ok') AS ok, "
               "GROUP_CONCAT(DISTINCT a.case_name) AS case_names FROM runs r "
               "LEFT JOIN attempts a ON a.run_id = r.run_id GROUP BY r.run_id ORDER BY r.started_at DESC")
        rows = [_decode(r) for r in self.conn.execute(sql + (f" LIMIT {int(limit)}" if limit else ""))]
        return rows

    def resolve_run(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, or ``last``: the newest run of any source, the first row of
        ``accelbench runs`` (an import included, so that ``show last`` after an import shows it)."""
        if ref in ("last", "latest"):
            row = self.conn.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
            if row is None:
                raise UserError(f"{self.path} holds no run yet", "run a case first: accelbench run ...")
            return row[0]
        rows = [r[0] for r in self.conn.execute("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ?",
                                                 (ref, ref.replace("%", "") + "%"))]
        if ref in rows:
            return ref
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise UserError(f"no run {ref!r} in {self.path}", "list the runs with: accelbench runs")
        raise UserError(f"{ref!r} matches {len(rows)} runs ({', '.join(rows[:5])}...)", "give more of the run id")

    def run(self, run_id: str) -> dict:
        row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in {self.path}", "list the runs with: accelbench runs")
        return _decode(row)

    def attempts(self, where: Optional[dict] = None, run_ids: Iterable[str] = ()) -> list[Attempt]:
        """Attempts matching every ``key=value`` in ``where`` (and in one of ``run_ids`` if given), oldest
        first; each read as the row version it was written with and migrated to today's (versions.read_row)."""
        clauses, params = [], []
        for key, value in (where or {}).items():
            if key not in FILTER_KEYS:
                raise UserError(f"cannot select attempts by {key!r}",
                                f"use one of: {', '.join(FILTER_KEYS)}")
            clauses.append(f'CAST("{key}" AS TEXT) = ?')
            params.append(str(value))
        run_ids = list(run_ids)
        if run_ids:
            clauses.append(f"run_id IN ({', '.join('?' for _ in run_ids)})")
            params += run_ids
        sql = "SELECT * FROM attempts" + (f" WHERE {' AND '.join(clauses)}" if clauses else "") + " ORDER BY id"
        from run_benchmarks.results.store.versions import read_row  # pydantic: with the first row read

        return [read_row(_decode(r), str(self.path)) for r in self.conn.execute(sql, params)]


class _Damaged(sqlite3.DatabaseError):
    """The integrity check found a problem."""


def store_path(log_root: Path) -> Path:
    return Path(log_root) / DB_NAME

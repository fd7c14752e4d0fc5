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

summary.json and results.json are to be written with ``write_text_atomically`` (temporary file, fsync,
rename): a full disk then leaves the old file or none, never an empty one.
"""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from .errors import UserError
from .record import RESULTS_SCHEMA  # noqa: F401 - RESULTS_SCHEMA: where readers looked for it
from .store_faults import StoreCorrupt, StoreUnavailable, is_full, is_locked, locked_fix
from .store_schema import (FILTER_KEYS, Attempt, _decode, _insert_attempt, add_missing_columns, check_version,
                           create_schema)

DB_NAME = "results.db"

WAIT_ENV, RETRY_ENV = "ACCELBENCH_STORE_WAIT_S", "ACCELBENCH_STORE_RETRY_S"
DEFAULT_WAIT_S, DEFAULT_RETRY_S = 30.0, 120.0
SCAN_BUDGET_S = 10.0  # the row scan of the open check stops here on a very large store (quick_check is whole)
FINALIZE_WAIT_S = 2.0  # finalizing dead runs at open is a courtesy: it does not wait long for a lock


def _seconds(env: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(env, default)))
    except ValueError:
        return default


def _stderr(message: str) -> None:
    print(f"accelbench: {message}", file=sys.stderr, flush=True)


class ResultStore:
    """``wait_s``: how long opening and the run's own row wait for a lock; ``retry_s``: how long an attempt's
    write is retried; ``finalize``: finalize this host's runs whose orchestrator is gone; ``announce``: where
    notes go (stderr)."""

    def __init__(self, path: Path, wait_s: Optional[float] = None, retry_s: Optional[float] = None,
                 finalize: bool = True, announce: Optional[Callable[[str], None]] = None):
        self.path = Path(path)
        self.wait_s = _seconds(WAIT_ENV, DEFAULT_WAIT_S) if wait_s is None else wait_s
        self.retry_s = _seconds(RETRY_ENV, DEFAULT_RETRY_S) if retry_s is None else retry_s
        self.announce = announce or _stderr
        self.unstored: list[str] = []  # what this process could not write (attempts, the run's end)
        self.finalized: list[str] = []  # notes on the runs this open finalized
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.is_file() and self.path.stat().st_size > 0
        self.conn = sqlite3.connect(self.path, timeout=self.wait_s, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            if existed:
                self._check_integrity()  # before anything writes to a file that may be damaged
            self.conn.execute("PRAGMA journal_mode=WAL")  # readers never block the run that writes
            self.conn.execute("PRAGMA synchronous=FULL")
            create_schema(self.conn)
            check_version(self.conn)
            add_missing_columns(self.conn)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            if is_locked(exc):
                raise StoreUnavailable(f"the results store {self.path} is locked: another process has held a write "
                                       f"transaction on it for more than {self.wait_s:g} s",
                                       locked_fix(self.path, WAIT_ENV)) from None
            if is_full(exc):
                raise StoreUnavailable(f"the results store {self.path} cannot be written: the disk is full",
                                       "free space on its file system, or point --db at another file") from None
            if existed and ("malformed" in str(exc) or "corrupt" in str(exc) or isinstance(exc, _Damaged)):
                raise StoreCorrupt(f"the results store {self.path} is damaged: {exc}",
                                   f"rebuild it from the runs' results.json files: accelbench store repair --db "
                                   f"{self.path} --log-root {self.path.parent} (it first moves the damaged file "
                                   f"aside to {self.path.name}.damaged-<time>; or move it yourself); runs brought "
                                   "in with `accelbench import` must be imported again") from None
            raise UserError(f"{self.path} is not an accelbench results store: {exc}",
                            "point --db (or the log root) at another file, or move this one away") from None
        if finalize:
            self.finalize_dead_runs()

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
        """``fields``: CASE_COLUMNS, run_id, round, status, ... and ``metrics`` as a dict (or None)."""
        sql, params = _insert_attempt(fields)
        return self._transaction(sql, params, self.retry_s, what)

    # ------------------------------------------------------------ finalizing and repairing (store_recovery.py)

    def finalize_dead_runs(self) -> list[str]:
        """Runs still ``running`` whose orchestrator on this host is gone: finished rounds added, ``killed``."""
        from .store_recovery import finalize_dead_runs

        return finalize_dead_runs(self)

    def repair(self, folders: Sequence[Path]) -> list[str]:
        """Add every attempt whose results.json (under ``folders``) the store lacks; idempotent."""
        from .store_recovery import repair

        return repair(self, folders)

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
        first."""
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
        return [Attempt(_decode(r)) for r in self.conn.execute(sql, params)]


class _Damaged(sqlite3.DatabaseError):
    """The integrity check found a problem."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def store_path(log_root: Path) -> Path:
    return Path(log_root) / DB_NAME


def _fsync_folder(folder: Path) -> None:
    """A rename or a link is on the disk only once its folder is (best effort: not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole, or stays as it was: written to a temporary file beside it, flushed to the
    disk (fsync), renamed over it, and the folder flushed. A full disk leaves neither an empty nor a half file
    (the temporary one is removed) and raises the OSError. For summary.json and results.json: a reader (the
    store's recovery among them) never takes an empty file for a run's end."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    _fsync_folder(path.parent)

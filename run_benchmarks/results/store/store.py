"""The results store: one SQLite file under the log root (the default), or a team's PostgreSQL database
(``--db postgresql://...``); one row per attempt, the same rows and logic on either engine (the engine's own
parts: sqlite_file.py, postgres_server.py, dialect.py).

Every attempt of every round is a row, failures included (status ok, failed, oom,
unsupported, timeout, interrupted, start_error), written in its own transaction as
soon as the round ends: a run killed with SIGKILL leaves every finished attempt
readable. By default no server: ``sqlite3`` is in the standard library. Headline figures
are columns (so they can be filtered and sorted); the complete metrics, the
workload, the environment and the warnings are JSON beside them.

Faults the store meets and what it does (tests/test_store_faults.py):

- another process holds a write transaction: every write waits (SQLite's busy timeout) and is retried with
  backoff for a bounded time ($ACCELBENCH_STORE_WAIT_S at open and for the run's own row, default 30 s;
  $ACCELBENCH_STORE_RETRY_S for an attempt, default 120 s), then gives up with ``StoreUnavailable``;
- a PostgreSQL server out of reach (stopped, restarting, a network cut): a write is retried, on a new
  connection, within the same budgets, then gives up with ``StoreUnavailable``; the round stays in its
  results.json, and ``store repair`` (or the next open, for a run whose orchestrator has ended) adds it;
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

Writing under locks with retries and reading are one job; opening each engine, recovery, overlap warnings,
the clock and the file checks are modules beside it.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from run_benchmarks.errors import UserError
from run_benchmarks.results.store import location as locations
from run_benchmarks.results.store.clock import DEFAULT_RETRY_S, DEFAULT_WAIT_S, RETRY_ENV, WAIT_ENV, seconds_from_env
from run_benchmarks.results.store.connection import Connection
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable, locked_fix
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.overlap import overlapping_runs, started_beside
from run_benchmarks.results.store.recovery import StoreRecovery
from run_benchmarks.results.store.schema import FILTER_KEYS, Attempt, _decode, _insert_attempt

DB_NAME = "results.db"
_RETRIED = ("locked", "unreachable")  # what waiting can mend: another writer's lock, a server coming back


def _stderr(message: str) -> None:
    print(f"accelbench: {message}", file=sys.stderr, flush=True)


class ResultStore(StoreRecovery):
    """``where``: a StoreLocation, or a file path (SQLite); ``wait_s``: how long opening and the run's own row
    wait for a lock; ``retry_s``: how long an attempt's write is retried; ``finalize``: finalize this host's runs
    whose orchestrator is gone; ``announce``: where notes go (stderr); ``reader``: a reading command's open (the
    store is never made, and an SQLite file this process cannot write is opened read-only)."""

    def __init__(self, where: Union[StoreLocation, Path, str], wait_s: Optional[float] = None,
                 retry_s: Optional[float] = None, finalize: bool = True,
                 announce: Optional[Callable[[str], None]] = None, reader: bool = False):
        self.location = (where if isinstance(where, StoreLocation) else locations.parse(where) if isinstance(where, str)
                         else locations.file(Path(where)))
        self.path: Optional[Path] = self.location.path  # the SQLite file; None for a server
        self.where = str(self.location)  # as messages name the store (a URL never holds a password)
        self.wait_s = seconds_from_env(WAIT_ENV, DEFAULT_WAIT_S) if wait_s is None else wait_s
        self.retry_s = seconds_from_env(RETRY_ENV, DEFAULT_RETRY_S) if retry_s is None else retry_s
        self.announce = announce or _stderr
        self.unstored: list[str] = []  # what this process could not write (attempts, the run's end)
        self.finalized: list[str] = []  # notes on the runs this open finalized
        self.read_only: Optional[str] = None  # why a reader opened the store read-only; None: opened to write
        self.retrying = False  # a write being tried again after its connection was lost (it may have landed)
        if self.location.url:
            from run_benchmarks.results.store.postgres_server import open_server

            self.conn: Connection = open_server(self, reader)
        else:
            from run_benchmarks.results.store.sqlite_file import open_file

            self.conn = open_file(self, reader)
        if finalize and self.read_only is None:
            self.finalize_dead_runs()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def _write(self, work: Callable[[Connection], Any], budget_s: float, env: str, what: str) -> Any:
        """``work`` inside one write transaction under the store's write lock; while another process holds the
        lock, or the server cannot be reached, waited for and retried with backoff until ``budget_s`` has
        passed, then StoreUnavailable. Other errors (a full disk, a damaged file) are raised at once: waiting
        does not mend them."""
        began = time.monotonic()
        pause, told = 0.25, False
        self.retrying = False
        try:
            while True:
                left = budget_s - (time.monotonic() - began)
                try:
                    # The first wait is short, so a wait of any length is announced; later ones let the engine wait.
                    self.conn.begin_write(min(left, 5.0 if told else 1.0))
                    try:
                        value = work(self.conn)
                        self.conn.commit()
                    except BaseException:
                        self.conn.rollback()
                        raise
                    return value
                except StoreError as exc:
                    if exc.kind not in _RETRIED:
                        raise
                    self.retrying = self.retrying or exc.kind == "unreachable"
                    left = budget_s - (time.monotonic() - began)
                    if left <= 0:
                        raise self._gave_up(exc, budget_s, env, what) from None
                    if not told:
                        told = True
                        cause = ("is locked by another process" if exc.kind == "locked" else
                                 f"cannot be reached ({str(exc).splitlines()[0]})")
                        self.announce(f"the results store {self.where} {cause}; retrying {what} for up to "
                                      f"{budget_s:g} s")
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, 8.0)
        finally:
            self.retrying = False

    def _gave_up(self, exc: StoreError, budget_s: float, env: str, what: str) -> StoreUnavailable:
        if exc.kind == "unreachable":
            failure = StoreUnavailable(f"the results store {self.where} could not be reached for {budget_s:g} s, so "
                                       f"{what} could not be written: {str(exc).splitlines()[0]}",
                                       f"once the server is back, add what the results.json files hold: accelbench "
                                       f"store repair --db {self.where}; ${env} sets how long to retry")
            failure.reason = f"the database server could not be reached for {budget_s:g} s"
            return failure
        fix = (locked_fix(self.path, env) if self.path else
               f"let the other writer finish, then run again; ${env} sets how long to wait")
        failure = StoreUnavailable(f"the results store {self.where} is locked: another process has held a write "
                                   f"transaction on it for more than {budget_s:g} s, so {what} could not be written",
                                   fix)
        failure.reason = f"locked by another process for more than {budget_s:g} s"
        return failure

    def _transaction(self, sql: str, params: Sequence, budget_s: Optional[float] = None,
                     what: str = "a row", env: str = RETRY_ENV) -> Optional[int]:
        def work(conn: Connection) -> Optional[int]:
            row = conn.execute(sql, params).fetchone()
            return row[0] if row is not None and len(row) else None
        return self._write(work, self.retry_s if budget_s is None else budget_s, env, what)

    def begin_run(self, run_id: str, started_at: str, argv: Sequence[str], commit: Optional[str],
                  log_dir: Optional[str], source: str = "accelbench",
                  orchestrator: Optional[tuple[str, int, float]] = None) -> None:
        """``orchestrator``: (host, pid, start time) of the process that will end the run (see
        orchestrator_identity); a run without one is never finalized by someone else. A run begun again (a
        sweep resumed) is running again, as a new row would be."""
        host, pid, started = orchestrator or (None, None, None)
        self._transaction("INSERT INTO runs (run_id, started_at, status, argv, accelbench_commit, log_dir, source, "
                          "orchestrator_host, orchestrator_pid, orchestrator_started) "
                          "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                          "started_at = excluded.started_at, ended_at = NULL, status = 'running', "
                          "argv = excluded.argv, accelbench_commit = excluded.accelbench_commit, "
                          "log_dir = excluded.log_dir, source = excluded.source, "
                          "orchestrator_host = excluded.orchestrator_host, "
                          "orchestrator_pid = excluded.orchestrator_pid, "
                          "orchestrator_started = excluded.orchestrator_started, note = NULL",
                          (run_id, started_at, json.dumps(list(argv)), commit, log_dir, source, host, pid, started),
                          self.wait_s, f"run {run_id}", WAIT_ENV)

    def end_run(self, run_id: str, ended_at: str, status: str = "done") -> None:
        self._transaction("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?", (ended_at, status, run_id),
                          self.retry_s, f"the end of run {run_id}")

    def add_attempt(self, fields: dict, what: str = "the attempt") -> Optional[int]:
        """``fields``: CASE_COLUMNS, run_id, round, status, ... and ``metrics`` as a dict (or None). The other
        runs that ran on this machine during the attempt (overlapping_runs) are added to its warnings. Tried
        again after a lost connection, a write whose commit may have landed is looked for first: never twice."""
        overlaps = overlapping_runs(self.conn, fields)
        if overlaps:
            fields = {**fields, "warnings": [*(fields.get("warnings") or []), *overlaps]}
            if isinstance(fields.get("record"), dict):
                fields["record"] = {**fields["record"], "warnings": list(fields["warnings"])}
        sql, params = _insert_attempt(fields)

        def work(conn: Connection) -> Optional[int]:
            if self.retrying and fields.get("results_path"):
                row = conn.execute("SELECT id FROM attempts WHERE run_id = ? AND results_path = ? AND attempt = ?",
                                   (fields.get("run_id"), fields["results_path"], fields.get("attempt", 1))).fetchone()
                if row is not None:
                    return row[0]
            return conn.execute(sql, params).fetchone()[0]
        return self._write(work, self.retry_s, RETRY_ENV, what)

    # ------------------------------------------------------------ reading

    def runs(self, limit: Optional[int] = None) -> list[dict]:
        sql = ("SELECT r.*, COUNT(a.id) AS attempts, "
               "CAST(SUM(CASE WHEN a.status = 'ok' THEN 1 WHEN a.status IS NULL THEN NULL ELSE 0 END) AS INTEGER) "
               f"AS ok, {self.conn.dialect.group_concat('a.case_name')} AS case_names FROM runs r "
               "LEFT JOIN attempts a ON a.run_id = r.run_id GROUP BY r.run_id ORDER BY r.started_at DESC, r.run_id DESC")
        rows = [_decode(r) for r in self.conn.execute(sql + (f" LIMIT {int(limit)}" if limit else ""))]
        for row in rows:  # in name order on either engine (neither orders a DISTINCT aggregate the same way)
            row["case_names"] = ",".join(sorted(row["case_names"].split(","))) if row["case_names"] else None
        return rows

    def started_beside(self, run_id: str) -> list:
        """Other runs whose orchestrator on this run's machine started after it (store/overlap.py): rows with
        run_id, started_at and orchestrator_pid; empty when the store cannot say."""
        return started_beside(self.conn, run_id)

    def has_run(self, run_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def columns(self, table: str) -> set[str]:
        """The columns ``table`` has (what a received row may fill)."""
        return set(self.conn.column_names(table))

    def resolve_run(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, or ``last``: the newest run of any source, the first row of
        ``accelbench runs`` (an import included, so that ``show last`` after an import shows it)."""
        if ref in ("last", "latest"):
            row = self.conn.execute("SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1").fetchone()
            if row is None:
                raise UserError(f"{self.where} holds no run yet", "run a case first: accelbench run ...")
            return row[0]
        rows = [r[0] for r in self.conn.execute("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ?",
                                                 (ref, ref.replace("%", "") + "%"))]
        if ref in rows:
            return ref
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise UserError(f"no run {ref!r} in {self.where}", "list the runs with: accelbench runs")
        raise UserError(f"{ref!r} matches {len(rows)} runs ({', '.join(rows[:5])}...)", "give more of the run id")

    def run(self, run_id: str) -> dict:
        row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in {self.where}", "list the runs with: accelbench runs")
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

        return [read_row(_decode(r), self.where) for r in self.conn.execute(sql, params)]


def store_path(log_root: Path) -> Path:
    return Path(log_root) / DB_NAME

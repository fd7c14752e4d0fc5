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
  had written its summary.json: it ended, only its end was not recorded). A run started on another host is left
  alone: its process cannot be looked at from here;
- ``repair`` adds the attempts of results.json files the store lacks, never twice: the way back after any of
  the above, and the way to rebuild a store that had to be moved aside.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import psutil

from .errors import UserError
from .record import RESULTS_SCHEMA, RoundRecord  # noqa: F401 - RESULTS_SCHEMA: where readers looked for it

DB_NAME = "results.db"
SCHEMA_VERSION = 1

# Figures copied out of the metrics into columns: (column, key in RoundMetrics.to_dict(), sub-key)
METRIC_COLUMNS = (
    ("tokens_per_s_per_device", "tokens_per_s_per_device", None),
    ("tokens_per_s_total", "tokens_per_s_total", None),
    ("effective_tokens_per_s_per_device", "effective_tokens_per_s_per_device", None),
    ("samples_per_s", "samples_per_s", None),
    ("tflops_per_device", "tflops_per_device", None),
    ("mfu", "mfu", None),
    ("peak_memory_bytes", "peak_memory_bytes", "max"),
    ("peak_memory_reserved_bytes", "peak_memory_reserved_bytes", "max"),
    ("memory_total_bytes", "memory_total_bytes", None),
    ("step_time_median_s", "step_time_s", "median"),
    ("init_time_s", "init_time_s", None),
    ("first_step_time_s", "first_step_time_s", None),
    ("loss_last", "loss_last", None),
    ("samples_per_step", "samples_per_step", None),
)
MONITOR_COLUMNS = ("accel_util_mean", "power_w_mean", "energy_j", "tokens_per_joule",
                   "device_memory_used_bytes")  # from the monitors
CASE_COLUMNS = ("case_name", "case", "framework", "framework_version", "hardware", "vendor", "nnodes",
                "nprocs_per_node", "world_size", "repeat", "extern_config", "extern_config_hash")
FILTER_KEYS = CASE_COLUMNS + ("run_id", "status", "precision", "source")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    status TEXT NOT NULL,            -- running | done | interrupted | aborted | killed (see RUN_STATUSES)
    argv TEXT,                       -- JSON list
    accelbench_commit TEXT,
    log_dir TEXT,
    source TEXT NOT NULL,            -- accelbench, or import:<parser>/<version>
    orchestrator_host TEXT,          -- socket.gethostname() of the process that runs it
    orchestrator_pid INTEGER,
    orchestrator_started REAL,       -- that process's start time (psutil create_time): pids are reused
    note TEXT                        -- how the run was finalized when not by itself (killed, repaired)
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    {", ".join(f'"{c}"' for c in CASE_COLUMNS)},
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    reason TEXT,
    precision TEXT,
    started_at TEXT,
    ended_at TEXT,
    wall_time_s REAL,
    {", ".join(f"{c} REAL" for c, _, _ in METRIC_COLUMNS)},
    {", ".join(f"{c} REAL" for c in MONITOR_COLUMNS)},
    metrics TEXT,                    -- JSON: RoundMetrics.to_dict()
    monitor TEXT,                    -- JSON: monitoring.summarize_round()
    figures TEXT,                    -- JSON: the round's task figures (figures.Figure.to_dict() each)
    workload TEXT,                   -- JSON: the resolved workload
    environment TEXT,                -- JSON: orchestrator + per node
    warnings TEXT,                   -- JSON list
    error_lines TEXT,                -- JSON list
    accelbench_commit TEXT,
    results_path TEXT,
    source TEXT NOT NULL,
    record TEXT                      -- JSON: the whole round record (record.RoundRecord) the columns come from
);
CREATE INDEX IF NOT EXISTS attempts_run ON attempts(run_id);
CREATE INDEX IF NOT EXISTS attempts_case ON attempts("case", framework, hardware);
"""

_JSON_COLUMNS = ("metrics", "monitor", "figures", "workload", "environment", "warnings", "error_lines", "argv",
                 "record")
# Columns added after schema version 1 was first written: (name, type), added to older files on open.
_ADDED_COLUMNS = tuple((c, "REAL") for c in MONITOR_COLUMNS) + (("monitor", "TEXT"),
                                                                  ("peak_memory_reserved_bytes", "REAL"),
                                                                  ("figures", "TEXT"), ("record", "TEXT"))
_ADDED_RUN_COLUMNS = (("orchestrator_host", "TEXT"), ("orchestrator_pid", "INTEGER"),
                      ("orchestrator_started", "REAL"), ("note", "TEXT"))

RUN_STATUSES = {
    "running": "under way (or its orchestrator runs on another host: only that host can tell it ended)",
    "done": "every planned round ran",
    "interrupted": "stopped with Ctrl-C",
    "aborted": "stopped by accelbench because its results could not be written (disk full)",
    "killed": "its orchestrator died without ending it (SIGKILL, crash, reboot); found by a later open",
}
WAIT_ENV, RETRY_ENV = "ACCELBENCH_STORE_WAIT_S", "ACCELBENCH_STORE_RETRY_S"
DEFAULT_WAIT_S, DEFAULT_RETRY_S = 30.0, 120.0
SCAN_BUDGET_S = 10.0  # the row scan of the open check stops here on a very large store (quick_check is whole)
FINALIZE_WAIT_S = 2.0  # finalizing dead runs at open is a courtesy: it does not wait long for a lock


def _seconds(env: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(env, default)))
    except ValueError:
        return default


class StoreUnavailable(UserError):
    """A write the store could not take within its time budget: another process holds the lock."""

    reason = ""  # the cause in a few words, for a line that names the store already


class StoreCorrupt(UserError):
    """The file fails the integrity check: nothing is started on it."""


def is_locked(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_FULL) or "disk is full" in str(exc)


def locked_fix(path: Path, env: str) -> str:
    return (f"let the other process finish or end it (`fuser -v {path}` names it; an open `sqlite3` shell inside "
            f"BEGIN ... counts), then run again; or point --db at another file; ${env} sets how long to wait")


def _stderr(message: str) -> None:
    print(f"accelbench: {message}", file=sys.stderr, flush=True)


def orchestrator_identity() -> tuple[str, int, float]:
    """(host, pid, start time) of this process, to tell later whether it is still alive."""
    return socket.gethostname(), os.getpid(), psutil.Process().create_time()


def process_alive(pid: Optional[int], started: Optional[float]) -> bool:
    """Whether process ``pid`` on this host is the one that started at ``started`` and has not ended."""
    if pid is None:
        return True  # unknown: assume alive, never finalize what cannot be checked
    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - float(started)) < 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


@dataclass(frozen=True)
class Attempt:
    """One stored row, JSON columns decoded."""
    row: dict

    def __getitem__(self, key: str) -> Any:
        return self.row[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.row.get(key, default)

    @property
    def ok(self) -> bool:
        return self.row["status"] == "ok"

    def record(self) -> RoundRecord:
        """The round record the row was made from (rows older than the ``record`` column: rebuilt from the
        columns, which held all of it)."""
        if self.row.get("record"):
            return RoundRecord.model_validate(self.row["record"])
        return record_from_row(self.row)


def _decode(row: sqlite3.Row) -> dict:
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and out[key] is not None:
            out[key] = json.loads(out[key])
    return out


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
            self._create_schema()
            self._check_version()
            self._add_missing_columns()
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

    def _create_schema(self) -> None:
        have = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master")}
        if not {"meta", "runs", "attempts", "attempts_run", "attempts_case"} <= have:  # else no write lock needed
            self.conn.executescript(_SCHEMA)

    def _check_version(self) -> None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            with self.conn:
                self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema version {row[0]} is newer than this accelbench reads "
                                        f"({SCHEMA_VERSION})")

    def _add_missing_columns(self) -> None:
        for table, added in (("attempts", _ADDED_COLUMNS), ("runs", _ADDED_RUN_COLUMNS)):
            have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            for name, kind in added:
                if name not in have:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

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


def with_columns(fields: dict) -> dict:
    """The row with the columns derived from its metrics and monitor (what a stored row holds, decoded)."""
    row = dict(fields)
    metrics = row.get("metrics") or {}
    for column, key, sub in METRIC_COLUMNS:
        value = metrics.get(key)
        row[column] = value.get(sub) if sub and isinstance(value, dict) else value
    row["precision"] = row.get("precision") or metrics.get("precision")
    monitor = row.get("monitor") or {}
    for column in MONITOR_COLUMNS:
        row[column] = monitor.get(column)
    return row


def _insert_attempt(fields: dict) -> tuple[str, list]:
    row = with_columns(fields)
    for key in _JSON_COLUMNS:
        if key in row and row[key] is not None:
            row[key] = json.dumps(row[key], default=str)
    columns = list(row)
    sql = (f"INSERT INTO attempts ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)})")
    return sql, [row[c] for c in columns]


def store_path(log_root: Path) -> Path:
    return Path(log_root) / DB_NAME


def row_from_document(doc: dict, attempt: int = 1) -> dict:
    """An attempts row from a round's results document (results.json), validated as a round record."""
    return RoundRecord.model_validate(doc).to_row(attempt)


def record_from_row(row: dict) -> RoundRecord:
    """A record from a row written before rows held their record whole."""
    return RoundRecord.model_validate({
        "run_id": row["run_id"], "case_name": row["case_name"],
        "case": {k: row[k] for k in CASE_COLUMNS if k != "case_name" and row.get(k) is not None},
        "round": row["round"],
        "status": row["status"], "reason": row.get("reason") or "", "warnings": row.get("warnings") or [],
        "error_lines": row.get("error_lines") or [], "started_at": row.get("started_at"),
        "ended_at": row.get("ended_at"), "wall_time_s": row.get("wall_time_s"),
        "results_path": row.get("results_path"), "metrics": row.get("metrics"), "monitor": row.get("monitor"),
        "figures": row.get("figures") or [], "workload": row.get("workload"),
        "environment": row.get("environment") or {}, "source": row.get("source") or "accelbench"})

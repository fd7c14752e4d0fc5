"""The results store: one SQLite file under the log root, one row per attempt.

Every attempt of every round is a row, failures included (status ok, failed, oom,
unsupported, timeout, interrupted, start_error), written in its own transaction as
soon as the round ends: a run killed with SIGKILL leaves every finished attempt
readable. No server; ``sqlite3`` is in the standard library. Headline figures
are columns (so they can be filtered and sorted); the complete metrics, the
workload, the environment and the warnings are JSON beside them.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from .errors import UserError

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
    status TEXT NOT NULL,            -- running | done | interrupted | killed (never ended)
    argv TEXT,                       -- JSON list
    accelbench_commit TEXT,
    log_dir TEXT,
    source TEXT NOT NULL             -- accelbench, or import:<parser>/<version>
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
    workload TEXT,                   -- JSON: the resolved workload
    environment TEXT,                -- JSON: orchestrator + per node
    warnings TEXT,                   -- JSON list
    error_lines TEXT,                -- JSON list
    accelbench_commit TEXT,
    results_path TEXT,
    source TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_run ON attempts(run_id);
CREATE INDEX IF NOT EXISTS attempts_case ON attempts("case", framework, hardware);
"""

_JSON_COLUMNS = ("metrics", "monitor", "workload", "environment", "warnings", "error_lines", "argv")
# Columns added after schema version 1 was first written: (name, type), added to older files on open.
_ADDED_COLUMNS = tuple((c, "REAL") for c in MONITOR_COLUMNS) + (("monitor", "TEXT"),
                                                                  ("peak_memory_reserved_bytes", "REAL"))


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


def _decode(row: sqlite3.Row) -> dict:
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and out[key] is not None:
            out[key] = json.loads(out[key])
    return out


class ResultStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")  # readers never block the run that writes
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(_SCHEMA)
            self._check_version()
            self._add_missing_columns()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise UserError(f"{self.path} is not an accelbench results store: {exc}",
                            "point --db (or the log root) at another file, or move this one away") from None

    def _check_version(self) -> None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            with self.conn:
                self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema version {row[0]} is newer than this accelbench reads "
                                        f"({SCHEMA_VERSION})")

    def _add_missing_columns(self) -> None:
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(attempts)")}
        for name, kind in _ADDED_COLUMNS:
            if name not in have:
                self.conn.execute(f"ALTER TABLE attempts ADD COLUMN {name} {kind}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def _transaction(self, sql: str, params: Sequence) -> int:
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.execute(sql, params)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return cur.lastrowid

    def begin_run(self, run_id: str, started_at: str, argv: Sequence[str], commit: Optional[str],
                  log_dir: Optional[str], source: str = "accelbench") -> None:
        self._transaction("INSERT OR REPLACE INTO runs (run_id, started_at, status, argv, accelbench_commit, "
                          "log_dir, source) VALUES (?, ?, 'running', ?, ?, ?, ?)",
                          (run_id, started_at, json.dumps(list(argv)), commit, log_dir, source))

    def end_run(self, run_id: str, ended_at: str, status: str = "done") -> None:
        self._transaction("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?", (ended_at, status, run_id))

    def add_attempt(self, fields: dict) -> int:
        """``fields``: CASE_COLUMNS, run_id, round, status, ... and ``metrics`` as a dict (or None)."""
        row = dict(fields)
        metrics = row.get("metrics") or {}
        for column, key, sub in METRIC_COLUMNS:
            value = metrics.get(key)
            row[column] = value.get(sub) if sub and isinstance(value, dict) else value
        row["precision"] = row.get("precision") or metrics.get("precision")
        monitor = row.get("monitor") or {}
        for column in MONITOR_COLUMNS:
            row[column] = monitor.get(column)
        for key in _JSON_COLUMNS:
            if key in row and row[key] is not None:
                row[key] = json.dumps(row[key], default=str)
        columns = list(row)
        sql = (f"INSERT INTO attempts ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in columns)}) "
               f"VALUES ({', '.join('?' for _ in columns)})")
        return self._transaction(sql, [row[c] for c in columns])

    # ------------------------------------------------------------ reading

    def runs(self, limit: Optional[int] = None) -> list[dict]:
        sql = ("SELECT r.*, COUNT(a.id) AS attempts, SUM(a.status = 'ok') AS ok, "
               "GROUP_CONCAT(DISTINCT a.case_name) AS case_names FROM runs r "
               "LEFT JOIN attempts a ON a.run_id = r.run_id GROUP BY r.run_id ORDER BY r.started_at DESC")
        rows = [_decode(r) for r in self.conn.execute(sql + (f" LIMIT {int(limit)}" if limit else ""))]
        return rows

    def resolve_run(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, or ``last``."""
        if ref in ("last", "latest"):
            row = self.conn.execute("SELECT run_id FROM runs WHERE source = 'accelbench' "
                                    "ORDER BY started_at DESC LIMIT 1").fetchone()
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


def store_path(log_root: Path) -> Path:
    return Path(log_root) / DB_NAME


def row_from_document(doc: dict, attempt: int = 1, source: str = "accelbench") -> dict:
    """An attempts row from a round's results document (launch.result_document, results.json)."""
    case = doc["case"]
    env = doc.get("environment") or {}
    return {
        "run_id": doc["run_id"], **{k: case.get(k) for k in CASE_COLUMNS if k != "case_name"},
        "case_name": doc["case_name"], "round": doc["round"], "attempt": attempt, "status": doc["status"],
        "reason": doc.get("reason"), "started_at": doc.get("started_at"), "ended_at": doc.get("ended_at"),
        "wall_time_s": doc.get("wall_time_s"), "metrics": doc.get("metrics"), "monitor": doc.get("monitor"),
        "workload": doc.get("workload"),
        "environment": env, "warnings": doc.get("warnings") or [], "error_lines": doc.get("error_lines") or [],
        "accelbench_commit": (env.get("orchestrator") or {}).get("accelbench_commit"),
        "results_path": doc.get("results_path"), "source": source,
        "precision": (doc.get("workload") or {}).get("train", {}).get("precision"),
    }

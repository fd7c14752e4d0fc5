"""The store's tables, columns, migrations and round record <-> row mapping: the layout, apart from the connection.
Written once for both engines: the column types are named as SQLite names them and put in each engine's words by
its dialect (dialect.py); every statement here is one both engines read."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the record's pydantic models: imported where a row becomes a record, not with the columns
    from run_benchmarks.results.rounds.record import RoundRecord
    from run_benchmarks.results.store.connection import Connection

SCHEMA_VERSION = 1  # the file's tables (meta); a newer one is refused at open. Columns are only ever added
ROW_VERSION = 7  # each attempts row's layout (column row_version), read and migrated by versions.read_row

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
_INTEGER_CASE_COLUMNS = ("nnodes", "nprocs_per_node", "world_size", "repeat")

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
    orchestrator_pid {{integer}},
    orchestrator_started {{real}},       -- that process's start time (psutil create_time): pids are reused
    note TEXT                        -- how the run was finalized when not by itself (killed, repaired)
);
CREATE TABLE IF NOT EXISTS attempts (
    id {{id_column}},
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    {", ".join(f'"{c}" {"{case_integer}" if c in _INTEGER_CASE_COLUMNS else "{case_text}"}' for c in CASE_COLUMNS)},
    round {{integer}} NOT NULL,
    attempt {{integer}} NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    reason TEXT,
    "precision" TEXT,
    started_at TEXT,
    ended_at TEXT,
    wall_time_s {{real}},
    {", ".join(f"{c} {{real}}" for c, _, _ in METRIC_COLUMNS)},
    {", ".join(f"{c} {{real}}" for c in MONITOR_COLUMNS)},
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
    record TEXT,                     -- JSON: the whole round record (record.RoundRecord) the columns come from
    row_version {{integer}}          -- the row's layout (ROW_VERSION), NULL: written before rows named it
);
CREATE INDEX IF NOT EXISTS attempts_run ON attempts(run_id);
CREATE INDEX IF NOT EXISTS attempts_case ON attempts("case", framework, hardware);
"""

_JSON_COLUMNS = ("metrics", "monitor", "figures", "workload", "environment", "warnings", "error_lines", "argv",
                 "record")
# Columns added after schema version 1 was first written: (name, type), added to older files on open.
_ADDED_COLUMNS = tuple((c, "REAL") for c in MONITOR_COLUMNS) + (("monitor", "TEXT"),
                                                                  ("peak_memory_reserved_bytes", "REAL"),
                                                                  ("figures", "TEXT"), ("record", "TEXT"),
                                                                  ("row_version", "INTEGER"))
_ADDED_RUN_COLUMNS = (("orchestrator_host", "TEXT"), ("orchestrator_pid", "INTEGER"),
                      ("orchestrator_started", "REAL"), ("note", "TEXT"))

RUN_STATUSES = {
    "running": "under way (or its orchestrator runs on another host: only that host can tell it ended)",
    "done": "every planned round ran",
    "interrupted": "stopped with Ctrl-C",
    "aborted": "stopped by accelbench because its results could not be written (disk full)",
    "killed": "its orchestrator died without ending it (SIGKILL, crash, reboot); found by a later open",
}


def schema_sql(conn: "Connection") -> list[str]:
    """The tables and indexes, one statement each, in the engine's types."""
    d = conn.dialect
    text = _SCHEMA.format(id_column=d.id_column, integer=d.integer, real=d.real, case_integer=d.case_integer,
                          case_text=d.case_text)
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def create_schema(conn: "Connection") -> None:
    if not {"meta", "runs", "attempts", "attempts_run", "attempts_case"} <= conn.names():  # else no lock needed
        conn.begin_write(conn.wait_s)
        try:
            for statement in schema_sql(conn):
                conn.execute(statement)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def check_version(conn: "Connection", write: bool = True) -> None:
    """A store newer than this accelbench is refused; one without its version gets it (when ``write``)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        if write:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING", (str(SCHEMA_VERSION),))
    elif int(row[0]) > SCHEMA_VERSION:
        from run_benchmarks.results.store.faults import StoreError  # psutil: not for --help, which reads the columns

        raise StoreError(f"schema version {row[0]} is newer than this accelbench reads ({SCHEMA_VERSION})", "newer")


def add_missing_columns(conn: "Connection", write: bool = True) -> None:
    """Columns added since the store was made: added to it (``write``), or, for a store opened read-only, read
    as NULL through a temporary view of the same name (temp comes first in either engine's name lookup)."""
    for table, added in (("attempts", _ADDED_COLUMNS), ("runs", _ADDED_RUN_COLUMNS)):
        have = set(conn.column_names(table))
        missing = [(name, conn.dialect.kind(kind)) for name, kind in added if name not in have]
        if write:
            for name, kind in missing:
                conn.execute(f"ALTER TABLE {table} {conn.dialect.add_column} {name} {kind}")
        elif missing:
            nulls = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in missing)
            conn.execute(f"CREATE TEMP VIEW {table} AS SELECT *, {nulls} FROM {conn.dialect.main}{table}")


@dataclass(frozen=True)
class Attempt:
    """One stored row, JSON columns decoded, as today's row version holds it. Read from the store through
    ``versions.read_row`` (checked by the rules of the version that wrote it, then migrated: ``version`` and
    ``migrations`` say which); made in-process from a record (``with_columns(record.to_row())``) as it is."""
    row: dict
    version: int = 0  # the row version it was written with; 0: made in this process, never stored
    migrations: tuple[str, ...] = ()  # the changes applied to read it (versions.ROW_MIGRATIONS)
    typed: Optional[RoundRecord] = field(default=None, compare=False, repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.row[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.row.get(key, default)

    @property
    def ok(self) -> bool:
        return self.row["status"] == "ok"

    def record(self) -> RoundRecord:
        """The round record the row was made from (read once, when the row was read from the store)."""
        if self.typed is not None:
            return self.typed
        from run_benchmarks.results.rounds.record import RoundRecord

        return RoundRecord.model_validate(self.row["record"])


def _decode(row: Any) -> dict:
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and out[key] is not None:
            out[key] = json.loads(out[key])
    return out


def with_columns(fields: dict) -> dict:
    """The row with the columns derived from its metrics and monitor (what a stored row holds, decoded)."""
    row = dict(fields)
    metrics = row.get("metrics") or {}
    for column, key, sub in METRIC_COLUMNS:
        value = metrics.get(key)
        value = value.get(sub) if sub and isinstance(value, dict) else value
        if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
            value = float(value)  # SQLite's integers are 64-bit; the exact figure stays in the metrics JSON
        row[column] = value
    row["precision"] = row.get("precision") or metrics.get("precision")
    monitor = row.get("monitor") or {}
    for column in MONITOR_COLUMNS:
        row[column] = monitor.get(column)
    return row


def _insert_attempt(fields: dict) -> tuple[str, list]:
    """Today's row (ROW_VERSION) from ``fields``: a record's to_row(), or a stored row read by read_row."""
    row = {**with_columns(fields), "row_version": ROW_VERSION}
    for key in _JSON_COLUMNS:
        if key in row and row[key] is not None:
            row[key] = json.dumps(row[key], default=str)
    columns = list(row)
    sql = (f"INSERT INTO attempts ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)}) RETURNING id")
    return sql, [row[c] for c in columns]


def row_from_document(doc: dict, attempt: int = 1) -> dict:
    """An attempts row from a round's results document (results.json), validated as a round record."""
    from run_benchmarks.results.rounds.record import RoundRecord

    return RoundRecord.model_validate(doc).to_row(attempt)

"""Stored rows read as the row version that wrote them, migrated forward by named changes
(run_benchmarks/results/store/versions.py).

Each older layout is built here as that accelbench built it: the first store's tables (2026-11-23, a5c5f95),
then the columns each later version added with ``ALTER TABLE`` on open, and a row written with the columns
that version wrote. Opened by today's store, every one reads into today's row and its round record, with
the changes it went through named. A row from a newer accelbench is refused with the version and the way
out; a malformed row with the column that is wrong, never read as empty.
"""
from __future__ import annotations

import json
import sqlite3

import pytest

from run_benchmarks.results.rounds.record import RoundRecord, Status
from run_benchmarks.results.store.schema import ROW_VERSION, row_from_document, with_columns
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.versions import (ROW_MIGRATIONS, NewerRowError, StoredRowError, read_row)

from .test_results import document, fill
from .test_untrusted_files import RUN, make_bundle, refused

# The first store's attempts table (a5c5f95), spelled out as it was written then.
_V1_METRICS = ("tokens_per_s_per_device", "tokens_per_s_total", "effective_tokens_per_s_per_device",
               "samples_per_s", "tflops_per_device", "mfu", "peak_memory_bytes", "memory_total_bytes",
               "step_time_median_s", "init_time_s", "first_step_time_s", "loss_last", "samples_per_step")
_V1 = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, ended_at TEXT, status TEXT NOT NULL,
    argv TEXT, accelbench_commit TEXT, log_dir TEXT, source TEXT NOT NULL);
CREATE TABLE attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id),
    "case_name", "case", "framework", "framework_version", "hardware", "vendor", "nnodes", "nprocs_per_node",
    "world_size", "repeat", "extern_config", "extern_config_hash",
    round INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 1, status TEXT NOT NULL, reason TEXT, precision TEXT,
    started_at TEXT, ended_at TEXT, wall_time_s REAL, {", ".join(f"{c} REAL" for c in _V1_METRICS)},
    metrics TEXT, workload TEXT, environment TEXT, warnings TEXT, error_lines TEXT, accelbench_commit TEXT,
    results_path TEXT, source TEXT NOT NULL);
CREATE INDEX attempts_run ON attempts(run_id);
CREATE INDEX attempts_case ON attempts("case", framework, hardware);
"""
# What each later version added on open (its add_missing_columns), and to each row it wrote.
_MONITOR = ("accel_util_mean", "power_w_mean", "energy_j", "tokens_per_joule", "device_memory_used_bytes")
_ADDED = {2: [(c, "REAL") for c in _MONITOR] + [("monitor", "TEXT")], 3: [("peak_memory_reserved_bytes", "REAL")],
          4: [("figures", "TEXT")], 5: [("record", "TEXT")]}
_MONITOR_SUMMARY = {"accel_util_mean": 81.5, "power_w_mean": 250.0, "energy_j": 7500.0, "tokens_per_joule": 12.5,
                    "device_memory_used_bytes": 2.0e9}
_FIGURES = [{"name": "rollout", "value": 52.67, "unit": "samples/s", "better": "higher", "params": None,
             "formula": None, "ranks": 2}]


def _doc() -> dict:
    return document("old", "gpt3_tiny", "torch", 0.5)


def _row_as_written(version: int) -> dict:
    """The row accelbench ``version`` wrote for ``_doc()``: the v1 columns, then what each version added."""
    full = with_columns(row_from_document({**_doc(), "monitor": _MONITOR_SUMMARY, "figures": _FIGURES}))
    row = {k: v for k, v in full.items() if k not in {"monitor", "figures", "record", *_MONITOR}}
    row.pop("peak_memory_reserved_bytes", None)
    if version >= 2:
        row.update(monitor=_MONITOR_SUMMARY, **_MONITOR_SUMMARY)
    if version >= 3:
        row["peak_memory_reserved_bytes"] = full["peak_memory_reserved_bytes"]
    if version >= 4:
        row["figures"] = _FIGURES
    if version >= 5:
        row["record"] = full["record"]
    return row


def _old_store(db, version: int) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(_V1)
    for added in range(2, version + 1):
        for name, kind in _ADDED[added]:
            conn.execute(f"ALTER TABLE attempts ADD COLUMN {name} {kind}")
    conn.execute("INSERT INTO runs VALUES ('old', '2026-11-23T10:00:00+00:00', '2026-11-23T11:00:00+00:00', "
                 "'done', '[]', 'abc123', '/logs', 'accelbench')")
    row = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in _row_as_written(version).items()}
    conn.execute(f"INSERT INTO attempts ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in row)}) "
                 f"VALUES ({', '.join('?' for _ in row)})", list(row.values()))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_row_of_each_older_version_reads_into_todays_row_with_the_changes_named(tmp_path, version):
    db = tmp_path / "results.db"
    _old_store(db, version)
    with ResultStore(db, finalize=False) as store:
        (attempt,) = store.attempts()
    # no row named its version before 6: read as the oldest, through every change, each naming itself
    assert attempt.version == 1
    assert attempt.migrations == tuple(m.change for m in ROW_MIGRATIONS)
    assert "record: the round record stored whole" in attempt.migrations
    assert attempt["row_version"] == ROW_VERSION
    record = attempt.record()
    assert isinstance(record, RoundRecord) and record.status is Status.ok and record.run_id == "old"
    assert record.case.world_size == 2 and record.case_name == "gpt3_tiny:torch:cpu:1:2"
    assert attempt["tokens_per_s_per_device"] == record.metrics["tokens_per_s_per_device"] > 0
    # what the version stored is kept; what it did not store is absent, never invented
    assert attempt["energy_j"] == (_MONITOR_SUMMARY["energy_j"] if version >= 2 else None)
    assert attempt["monitor"] == (_MONITOR_SUMMARY if version >= 2 else None)
    assert attempt["figures"] == (_FIGURES if version >= 4 else None)
    assert [f.value for f in record.figures] == ([52.67] if version >= 4 else [])
    assert (record.monitor or {}).get("energy_j") == (7500.0 if version >= 2 else None)


def test_todays_rows_name_their_version_and_need_no_migration(tmp_path):
    db = tmp_path / "results.db"
    fill(db, [_doc()])
    with ResultStore(db) as store:
        (attempt,) = store.attempts()
        (stored,) = store.conn.execute("SELECT row_version FROM attempts").fetchone()
    assert stored == ROW_VERSION == attempt.version and attempt.migrations == ()
    assert attempt.record() is attempt.typed  # read once, with the row


def test_the_chain_runs_from_1_to_today_one_named_step_each():
    assert [m.to_version for m in ROW_MIGRATIONS] == list(range(2, ROW_VERSION + 1))
    for step in ROW_MIGRATIONS:
        assert step.change and step.since.startswith("2026-") and step.migrate.__doc__


def test_a_row_from_a_newer_accelbench_is_refused_with_its_version_and_an_upgrade(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [_doc()])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE attempts SET row_version = ?", (ROW_VERSION + 1,))
    with ResultStore(db) as store, pytest.raises(NewerRowError) as caught:
        store.attempts()
    assert f"row version {ROW_VERSION + 1}; this one reads versions 1 to {ROW_VERSION}" in caught.value.message
    assert "upgrade accelbench" in caught.value.fix
    for command in (("show", "last"), ("report", "last")):
        refused(accelbench(*command, "--db", str(db)), "written by a newer accelbench", "upgrade accelbench")


@pytest.mark.parametrize("column, value, says", [
    ("nnodes", "two", "nnodes: Input should be a valid integer"),
    ("record", None, "record: Input should be a valid dictionary"),
    ("record", json.dumps({"schema": "accelbench.results/1", "run_id": "old"}), "record.case_name: Field required"),
    ("metrics", json.dumps([1, 2]), "metrics: Input should be a valid dictionary"),
])
def test_a_malformed_row_says_which_column_and_is_never_read_as_empty(tmp_path, column, value, says):
    db = tmp_path / "results.db"
    fill(db, [_doc()])
    with sqlite3.connect(db) as conn:
        conn.execute(f'UPDATE attempts SET "{column}" = ?', (value,))
    with ResultStore(db) as store, pytest.raises(StoredRowError) as caught:
        store.attempts()
    assert f"row 1 (run old, round 1), row version {ROW_VERSION}: {says}" in caught.value.message
    assert "store repair" in caught.value.fix


def test_an_unversioned_row_is_checked_by_the_first_versions_rules():
    row = {**_row_as_written(1), "id": 7, "world_size": None}
    with pytest.raises(StoredRowError, match=r"row 7 \(run old, round 1\), row version 1: world_size"):
        read_row(row, "old.db")
    with pytest.raises(StoredRowError, match="row_version 'x' is not a version"):
        read_row({**row, "row_version": "x"}, "old.db")


@pytest.mark.parametrize("version", [1, 4, 5])
def test_a_bundle_from_an_older_accelbench_imports_as_todays_rows(accelbench, tmp_path, version):
    row = {**_row_as_written(version), "run_id": RUN, "results_path": None}
    if version >= 5:
        row["record"] = {**row["record"], "run_id": RUN}
    bundle = make_bundle(tmp_path / "old.tar.gz", attempts=[row])
    db = tmp_path / "logs" / "results.db"
    result = accelbench("import", bundle, "--db", db)
    assert result.returncode == 0, result.stderr
    with ResultStore(db) as store:
        (attempt,) = store.attempts()
        (stored,) = store.conn.execute("SELECT row_version FROM attempts").fetchone()
    assert stored == ROW_VERSION and attempt.version == ROW_VERSION  # migrated on import, stored as today's
    assert attempt.record().case_name == "gpt3_tiny:torch:cpu:1:2" and attempt.record().run_id == RUN
    assert attempt["figures"] == (_FIGURES if version >= 4 else None)


def test_a_bundle_with_a_newer_or_malformed_row_imports_nothing(accelbench, tmp_path):
    db = tmp_path / "logs" / "results.db"
    newer = {**_row_as_written(5), "run_id": RUN, "row_version": ROW_VERSION + 1}
    refused(accelbench("import", make_bundle(tmp_path / "new.tar.gz", attempts=[newer]), "--db", db),
            "written by a newer accelbench", "nothing was imported", "upgrade accelbench")
    broken = {**_row_as_written(1), "run_id": RUN, "nnodes": "two"}
    refused(accelbench("import", make_bundle(tmp_path / "bad.tar.gz", attempts=[broken]), "--db", db),
            "row version 1: nnodes", "nothing was imported")
    assert not (tmp_path / "logs" / RUN).exists()

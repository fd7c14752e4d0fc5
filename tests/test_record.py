"""One typed round record: a run's results.json, its store row and summary.json all come from it, and
whatever reads them back validates it."""
from __future__ import annotations

import json
import sqlite3

import pytest
from pydantic import ValidationError

from run_benchmarks.results.rounds.record import RoundRecord, Status
from run_benchmarks.results.store.store import ResultStore

from .test_results import document, fill
from .goldens import SHORT_STEPS


def test_a_run_writes_one_record_to_results_json_the_store_and_summary_json(golden_local, accelbench):
    doc = golden_local.doc("opt_tiny:torch:cpu:1:1")
    record = RoundRecord.model_validate(doc)
    assert record.status is Status.ok and record.workload_hash and len(record.workload_hash) == 16
    assert record.workload["train"]["steps"] == SHORT_STEPS
    (row,) = [a for a in golden_local.attempts() if a["results_path"] == doc["results_path"]]
    assert row["record"] == doc  # stored whole
    assert row["tokens_per_s_per_device"] == doc["metrics"]["tokens_per_s_per_device"]  # columns derived from it
    summary = json.loads((golden_local.run_dir() / "summary.json").read_text())
    (line,) = [r for r in summary["rounds"] if r["results"] == doc["results_path"]]
    assert line["workload_hash"] == record.workload_hash
    assert line["tokens_per_s_per_device"] == doc["metrics"]["tokens_per_s_per_device"]
    shown = accelbench("show", "last", "--db", str(golden_local.db))
    assert shown.returncode == 0 and f"workload: {record.workload_hash}" in shown.stdout


def test_a_record_of_the_wrong_shape_is_refused_naming_the_key():
    doc = document("r1", "gpt2_tiny", "torch", 0.5)
    doc["round"] = "first"
    with pytest.raises(ValidationError) as info:
        RoundRecord.model_validate(doc)
    assert info.value.errors()[0]["loc"] == ("round",)
    doc = document("r1", "gpt2_tiny", "torch", 0.5, status="finished")
    with pytest.raises(ValidationError, match="status"):
        RoundRecord.model_validate(doc)


def test_store_repair_refuses_an_invalid_results_json_and_says_why(accelbench, tmp_path):
    folder = tmp_path / "logs" / "r1" / "case" / "round1"
    folder.mkdir(parents=True)
    doc = {**document("r1", "gpt2_tiny", "torch", 0.5), "schema": "accelbench.results/1", "status": "finished"}
    (folder / "results.json").write_text(json.dumps(doc))
    result = accelbench("store", "repair", "--db", str(tmp_path / "logs" / "results.db"))
    assert "not a valid round record: status" in result.stdout + result.stderr


def test_rows_from_before_the_record_column_read_back_as_records(tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("r1", "gpt2_tiny", "torch", 0.5)])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE attempts SET record = NULL, row_version = NULL")  # as rows before both
    with ResultStore(db) as store:
        (attempt,) = store.attempts()
        record = attempt.record()
    assert record.case_name == "gpt2_tiny:torch:cpu:1:2" and record.status is Status.ok
    assert record.metrics["tokens_per_s_per_device"] == attempt["tokens_per_s_per_device"]

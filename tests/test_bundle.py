"""A run's bundle (accelbench bundle) reads back into another store (accelbench import) with nothing lost, and a
damaged bundle is refused before anything is stored.

The run is real: a tiny CPU case run twice by the CLI as a user runs it (local processes, no Docker).
"""
from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

from run_benchmarks.results.bundle.archive import CHECKSUMS, MANIFEST
from run_benchmarks.results.report.facts import round_facts
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore



@pytest.fixture
def bundled(golden_bundle):
    """(log root, run id, bundle path): tests/goldens.py's golden_bundle."""
    return golden_bundle


def rows(db: Path) -> list[dict]:
    with ResultStore(db) as store:
        return [a.row for a in store.attempts()]


def comparable(row: dict, run_dir: Path) -> dict:
    """A row with its paths relative to its run folder: what must survive the trip unchanged."""
    out = {k: v for k, v in row.items() if k != "id"}
    out["results_path"] = str(Path(row["results_path"]).relative_to(run_dir))
    if isinstance(out.get("record"), dict):
        out["record"] = {**out["record"], "results_path": out["results_path"]}
    return out


def files_of(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_bundle_round_trips_into_an_empty_store_with_identical_rows(bundled, accelbench, tmp_path):
    log_root, run_id, bundle = bundled
    with tarfile.open(bundle, "r:gz") as tar:
        names = tar.getnames()
        sums = dict(reversed(line.split("  ", 1)) for line in tar.extractfile(CHECKSUMS).read().decode().splitlines())
        for name, digest in sums.items():  # the manifest is sha256sum's: every other file, each hash right
            assert hashlib.sha256(tar.extractfile(name).read()).hexdigest() == digest
        manifest = json.loads(tar.extractfile(MANIFEST).read())
    assert set(sums) == set(names) - {CHECKSUMS}
    run_dir = log_root / run_id
    original_files = files_of(run_dir)
    assert {f"run/{name}" for name in original_files} <= set(names)
    for kind in ("results.json", "resolved.yaml", "config.json", "rank0.stdout.log", "summary.json"):
        assert any(n.endswith(kind) for n in names), kind  # records, configs, logs of every round
    assert manifest["run_id"] == run_id and manifest["attempts"] == 2 and "environment.json" in names

    other = tmp_path / "elsewhere" / "results.db"
    done = accelbench("import", str(bundle), "--db", str(other))
    assert done.returncode == 0, done.stderr
    new_dir = other.parent / run_id
    assert f"run {run_id}: 2 attempt(s) and {len(original_files)} file(s) imported" in done.stdout

    before, after = [r for r in rows(log_root / "results.db") if r["run_id"] == run_id], rows(other)
    assert len(after) == 2
    assert [comparable(r, run_dir) for r in before] == [comparable(r, new_dir) for r in after]
    assert all(Path(r["results_path"]).is_file() and str(new_dir) in r["results_path"] for r in after)
    copied = files_of(new_dir)
    assert {k: v for k, v in copied.items() if k in original_files} == original_files  # every byte of every log
    with ResultStore(log_root / "results.db") as a, ResultStore(other) as b:
        old_run, new_run = a.run(run_id), b.run(run_id)
        for attempt in b.attempts():  # the hash reports group by is the one the run wrote into its record
            assert round_facts(attempt).workload_hash == (attempt.get("record") or {}).get("workload_hash")
        assert [(s.workload_hash, s.mean("tokens_per_s_per_device")) for s in summarize(a.attempts(run_ids=[run_id]))] == \
               [(s.workload_hash, s.mean("tokens_per_s_per_device")) for s in summarize(b.attempts())]
    assert {k: v for k, v in new_run.items() if k not in ("log_dir", "note")} == \
           {k: v for k, v in old_run.items() if k not in ("log_dir", "note")}
    assert new_run["log_dir"] == str(new_dir) and "imported from bundle handed-over.tar.gz" in new_run["note"]

    again = accelbench("import", str(bundle), "--db", str(other))
    assert again.returncode != 0 and f"already holds run {run_id}" in again.stderr
    assert len(rows(other)) == 2


def test_a_bundle_changed_in_transit_is_refused_and_leaves_nothing(bundled, accelbench, tmp_path):
    _, run_id, bundle = bundled
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(bundle, "r:gz") as src, tarfile.open(damaged, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("rank0.stdout.log") and "round1" in member.name:
                data = data.replace(b"step", b"stap", 1)  # one changed byte of one log, same length
                changed = member.name
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    other = tmp_path / "store" / "results.db"
    done = accelbench("import", str(damaged), "--db", str(other))
    assert done.returncode != 0
    assert f"{changed} does not match its SHA-256" in done.stderr and "nothing was imported" in done.stderr
    with sqlite3.connect(other) as conn:
        assert conn.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert sorted(p.name for p in other.parent.iterdir() if p.is_dir()) == []  # no half-extracted folder


def test_import_of_a_log_still_needs_its_format(accelbench, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("iteration 1/10 | elapsed time per iteration (ms): 100.0\n")
    done = accelbench("import", str(log), "--db", str(tmp_path / "results.db"))
    assert done.returncode != 0 and "import needs --format for a log" in done.stderr


def test_an_imported_run_bundles_the_logs_it_was_read_from(accelbench, tmp_path):
    from run_benchmarks.results.store.schema import row_from_document

    from .test_grouping import round_doc

    log = tmp_path / "vendor" / "workerlog.0"
    log.parent.mkdir()
    log.write_text("global_step: 10, loss: 5.1, interval_tokens_per_second_per_device: 1234.5\n")
    db = tmp_path / "a" / "results.db"
    with ResultStore(db) as store:
        store.begin_run("import-1", "2026-11-23T10:00:00+00:00", ["accelbench", "import", str(log)], None,
                        str(log.parent), source="import:paddlenlp/1")
        row = row_from_document(round_doc("import-1", 0.5))
        row.update(source="import:paddlenlp/1", results_path=str(log))
        store.add_attempt(row)
        store.end_run("import-1", "2026-11-23T10:01:00+00:00")
    out = tmp_path / "import.tar.gz"
    assert accelbench("bundle", "import-1", "--db", str(db), "-o", str(out)).returncode == 0
    other = tmp_path / "b" / "results.db"
    done = accelbench("import", str(out), "--db", str(other))
    assert done.returncode == 0, done.stderr
    (stored,) = rows(other)
    copied = Path(stored["results_path"])
    assert copied == other.parent / "import-1" / "imported" / "1-workerlog.0"
    assert copied.read_bytes() == log.read_bytes()
    (before,) = rows(db)
    if isinstance(stored.get("record"), dict):  # the whole round record points at the copy too
        assert stored["record"]["results_path"] == str(copied)
        assert {k: v for k, v in stored["record"].items() if k != "results_path"} == \
               {k: v for k, v in before["record"].items() if k != "results_path"}
    drop = ("id", "results_path", "record")
    assert {k: v for k, v in before.items() if k not in drop} == {k: v for k, v in stored.items() if k not in drop}

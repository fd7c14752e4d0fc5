"""The results store against what it may find instead of a healthy file: a summary.json a full disk left
empty, a store on read-only media, a path that is no file (``--db /dev/null``), an empty file, and a second
run on the same machine. Commands run as a user runs them (a real subprocess): exit 2 and one message with
its fix for what is refused, no traceback."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from run_benchmarks.store import ResultStore, write_text_atomically
from run_benchmarks.store_recovery import summary_state
from run_benchmarks.store_schema import row_from_document
from tests.infra.tmpfs import tmpfs

from .test_results import document
from .test_store_faults import fill

CASE = "gpt2_tiny:torch:cpu:1:1"


def refused(result, *needles: str) -> str:
    """Exit 2, one accelbench error naming every needle and its fix, no traceback."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    assert err.startswith("accelbench: error: ") and "\n  fix: " in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def dead_orchestrator() -> tuple[str, int, float]:
    """(host, pid, start) of a process that has ended: a run's orchestrator that died."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return socket.gethostname(), proc.pid, 1.0  # start time 1.0: a pid taken again is still not this one


def stored_run(db: Path, run_id: str = "r1", log_dir: Path | None = None, orchestrator=None, ended: bool = True,
               attempts: int = 1) -> None:
    with ResultStore(db) as store:
        store.begin_run(run_id, "2026-11-23T10:00:00+00:00", ["accelbench", "run"], "abc123",
                        str(log_dir) if log_dir else None, orchestrator=orchestrator)
        for round_ in range(1, attempts + 1):
            store.add_attempt(row_from_document(document(run_id, "gpt3_tiny", "torch", 0.5, round_=round_)))
        if ended:
            store.end_run(run_id, "2026-11-23T10:09:00+00:00")


# ---------------------------------------------------------------- (a) a full disk and summary.json


@pytest.mark.parametrize("content, why", [
    ("", "its summary.json is empty (0 bytes)"),
    ('{"run_id": "r1", "rounds": [{"case', "its summary.json is not whole JSON"),
    ('{"run_id": "other", "rounds": []}', "the summary of another run"),
    ("[1, 2]", "not a run summary"),
])
def test_an_empty_or_unreadable_summary_never_reads_as_a_finished_run(tmp_path, content, why):
    """The disk filled while summary.json was written: an empty file is left, and the store's end of the run
    could not be written either. The next open finds the orchestrator gone: the run stopped, it did not end."""
    run_dir = tmp_path / "logs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(content)
    db = tmp_path / "logs" / "results.db"
    stored_run(db, log_dir=run_dir, orchestrator=dead_orchestrator(), ended=False)
    notes = []
    with ResultStore(db, announce=notes.append) as store:
        run = store.run("r1")
    assert run["status"] == "aborted", run
    assert why in run["note"] and "marked aborted" in run["note"] and "full disk" in run["note"]
    assert notes == [run["note"]]


def test_a_whole_summary_still_marks_a_dead_run_done_and_none_marks_it_killed(tmp_path):
    done_dir, killed_dir = tmp_path / "logs" / "r1", tmp_path / "logs" / "r2"
    done_dir.mkdir(parents=True)
    killed_dir.mkdir()
    (done_dir / "summary.json").write_text(json.dumps({"run_id": "r1", "rounds": []}))
    db = tmp_path / "logs" / "results.db"
    stored_run(db, "r1", done_dir, dead_orchestrator(), ended=False)
    stored_run(db, "r2", killed_dir, dead_orchestrator(), ended=False)
    with ResultStore(db, announce=lambda _: None) as store:
        assert store.run("r1")["status"] == "done" and store.run("r2")["status"] == "killed"
    assert summary_state(done_dir, "r1") == ("ended", "")
    assert summary_state(killed_dir, "r2") == ("absent", "")


def test_store_repair_rebuilds_a_run_with_an_empty_summary_as_aborted(tmp_path):
    round_dir = tmp_path / "logs" / "r9" / "gpt3_tiny" / "round1"
    round_dir.mkdir(parents=True)
    (round_dir / "results.json").write_text(json.dumps(
        {"schema": "accelbench.results/1", **document("r9", "gpt3_tiny", "torch", 0.5)}))
    (tmp_path / "logs" / "r9" / "summary.json").write_text("")
    db = tmp_path / "logs" / "results.db"
    with ResultStore(db) as store:
        store.repair([tmp_path / "logs"])
        run = store.run("r9")
    assert run["status"] == "aborted" and "its summary.json is empty" in run["note"]


@contextmanager
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs with every free byte taken."""
    with tmpfs(tmp_path / "full", "4m") as mount_point:
        (mount_point / "run").mkdir()
        fill(mount_point)
        yield mount_point / "run"


def test_a_summary_written_on_a_full_disk_leaves_the_old_file_or_none_never_an_empty_one(tmp_path):
    with full_disk(tmp_path) as run_dir:
        plain = run_dir / "plain.json"
        with pytest.raises(OSError):
            plain.write_text("x" * 100_000)  # how summary.json was written: the failure leaves an empty file
        assert plain.stat().st_size == 0
        summary = run_dir / "summary.json"
        with pytest.raises(OSError):
            write_text_atomically(summary, "x" * 100_000)
        assert not summary.exists()
        assert sorted(p.name for p in run_dir.iterdir()) == ["plain.json"]  # no temporary file left either
    with tmpfs(tmp_path / "roomy", "4m") as run_dir:
        summary = run_dir / "summary.json"
        write_text_atomically(summary, '{"run_id": "r1", "rounds": []}\n')
        fill(run_dir)
        with pytest.raises(OSError):
            write_text_atomically(summary, json.dumps({"run_id": "r1", "rounds": ["x" * 100_000]}))
        assert json.loads(summary.read_text()) == {"run_id": "r1", "rounds": []}  # the old one, whole
        assert sorted(p.name for p in run_dir.iterdir()) == ["filler", "summary.json"]


def test_a_dead_run_without_a_summary_on_a_full_disk_is_marked_aborted_not_killed(tmp_path):
    """With summary.json written atomically, the full disk leaves none: the disk still full says why."""
    with full_disk(tmp_path) as run_dir:
        db = tmp_path / "results.db"
        stored_run(db, log_dir=run_dir, orchestrator=dead_orchestrator(), ended=False)
        with ResultStore(db, announce=lambda _: None) as store:
            run = store.run("r1")
    assert run["status"] == "aborted" and "no summary.json and its file system is full" in run["note"]

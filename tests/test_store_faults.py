"""The results store under faults, with real processes: a second process holding the store's write lock
(around a round's end, at start), a damaged store, an orchestrator killed with SIGKILL, a disk that fills up
mid-run, and the repair from results.json that brings back what the store missed."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.infra.tmpfs import tmpfs

from .conftest import ROOT
from .runner import ends_with_the_test
from .checks import kill_leftovers, leftover_processes
from .goldens import SHORT
from .test_results import document, fill as fill_store

CASE = "gpt2_tiny:torch:cpu:1:1"

_LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


class Locker:
    """A second process that holds a write transaction (BEGIN EXCLUSIVE) on the store for ``seconds``."""

    def __init__(self, db: Path, seconds: float):
        self.proc = subprocess.Popen([sys.executable, "-c", _LOCKER, str(db), str(seconds)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"
        self.until = time.monotonic() + seconds

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def start_run(log_root: Path, tmp_path: Path, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """The orchestrator in the background; its stderr goes to a file the test can read while it runs."""
    err = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", *args, "--log-root", str(log_root)]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.PIPE, stderr=open(err, "w"), text=True, preexec_fn=ends_with_the_test())
    return proc, err


def wait_for(condition, what: str, timeout: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def rows(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM attempts ORDER BY id")]
    finally:
        conn.close()


def runs(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY started_at")]
    finally:
        conn.close()


def results_docs(log_root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(log_root.glob("*/*/round*/results.json"))]


# ---------------------------------------------------------------- locked


def new_run_stepping(log_root: Path, before: set, round_: int = 1) -> bool:
    """Whether the run started after ``before`` (the run folders then) has a training step in ``round_``."""
    fresh = [p for p in log_root.iterdir() if p.is_dir() and p.name not in before] if log_root.is_dir() else []
    return any('"kind":"step"' in log.read_text(errors="replace")
               for run in fresh for log in run.glob(f"*/round{round_}/*/torchrun/*/attempt_0/0/stdout.log"))


def run_folders(log_root: Path) -> set:
    return {p.name for p in log_root.iterdir() if p.is_dir()} if log_root.is_dir() else set()


def existing_store(log_root: Path) -> Path:
    """A store holding one finished run of one ok attempt (WAL mode, as every store), made in this process:
    what these tests need of an earlier run is its store, not its training."""
    log_root.mkdir(parents=True, exist_ok=True)
    db = log_root / "results.db"
    fill_store(db, [document("20261101-000000-0000", "gpt2_tiny", "torch", 0.5, world=1)])
    return db


def test_a_lock_held_around_the_round_end_is_waited_out_and_the_attempt_stored(tmp_path):
    log_root = tmp_path / "logs"
    db = existing_store(log_root)
    before = run_folders(log_root)
    proc, err = start_run(log_root, tmp_path, CASE, *SHORT, env={"ACCELBENCH_STORE_RETRY_S": "90"})
    try:
        wait_for(lambda: new_run_stepping(log_root, before), "training", proc=proc)
        locker = Locker(db, 90)  # held from the first step to past the round's end ...
        wait_for(lambda: "retrying round 1" in err.read_text(), "the attempt's retries", proc=proc)
        locker.release()  # ... until the orchestrator says it waits for it
        stdout, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.read_text()
    locker.release()
    assert proc.returncode == 0, stderr
    assert "is locked by another process; retrying round 1 of gpt2_tiny:torch:cpu:1:1 for up to 90 s" in stderr
    assert "stored in" in stdout and "Traceback" not in stderr
    assert [r["status"] for r in rows(db)] == ["ok", "ok"]
    assert [r["status"] for r in runs(db)] == ["done", "done"]
    for doc in results_docs(log_root):
        assert not any("NOT in the results store" in w for w in doc["warnings"])


def test_a_lock_held_past_the_retry_budget_is_said_loudly_exits_4_and_repair_adds_the_attempt_once(
        accelbench, tmp_path):
    log_root = tmp_path / "logs"
    db = existing_store(log_root)
    before = run_folders(log_root)
    proc, err = start_run(log_root, tmp_path, CASE, *SHORT, env={"ACCELBENCH_STORE_RETRY_S": "3"})
    try:
        wait_for(lambda: new_run_stepping(log_root, before), "training", proc=proc)
        locker = Locker(db, 60)
        stdout, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.read_text()
    try:
        assert proc.returncode == 4, stderr
        assert "stored in" not in stdout and "Traceback" not in stderr
        assert "WARNING: round 1 of gpt2_tiny:torch:cpu:1:1: this attempt is NOT in the results store" in stderr
        assert "is NOT completely stored in" in stderr
        assert "fix: once the store can be written again" in stderr and "accelbench store repair --db" in stderr
        assert len(rows(db)) == 1  # only the first run's attempt: the second is not stored ...
        (run_id,) = run_folders(log_root) - before
        (doc_path,) = log_root.glob(f"{run_id}/*/round1/results.json")
        doc = json.loads(doc_path.read_text())  # ... and its results.json says so
        assert doc["status"] == "ok" and any("NOT in the results store" in w for w in doc["warnings"])
        assert not list(log_root.rglob("*.tmp"))
    finally:
        locker.release()
    # The next open sees the orchestrator gone; it wrote summary.json, so the run ended: done, not killed.
    listed = accelbench("runs", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert f"run {run_id}: marked done" in listed.stderr
    second = [r for r in runs(db) if r["run_id"] == run_id][0]
    assert second["status"] == "done" and "its end never reached the store" in second["note"]
    assert len(rows(db)) == 2  # finalizing added the attempt from its results.json
    repaired = accelbench("store", "repair", "--db", str(db))
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {run_id}: 0 attempt(s) added, 1 already stored" in repaired.stdout
    assert len(rows(db)) == 2  # never twice


def test_repair_adds_missing_attempts_once_and_rebuilds_a_lost_store(accelbench, golden_local, tmp_path):
    log_root = golden_local.copy(tmp_path / "logs")  # a real run of many cases, one round each
    db = log_root / "results.db"
    (run_id,) = [r["run_id"] for r in runs(db)]
    stored = len(rows(db))
    conn = sqlite3.connect(db)
    with conn:  # as if opt_tiny's round had never reached the store
        conn.execute("DELETE FROM attempts WHERE case_name = 'opt_tiny:torch:cpu:1:1'")
    conn.close()
    repaired = accelbench("store", "repair", "--log-root", str(log_root))
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {run_id}: 1 attempt(s) added, {stored - 1} already stored" in repaired.stdout
    again = accelbench("store", "repair", "--log-root", str(log_root))
    assert f"run {run_id}: 0 attempt(s) added, {stored} already stored" in again.stdout
    (restored,) = [r for r in rows(db) if r["case_name"] == "opt_tiny:torch:cpu:1:1"]
    assert (restored["round"], restored["status"]) == (1, "ok") and len(rows(db)) == stored
    assert "added to the store from" in restored["warnings"]
    round1 = json.loads(next(log_root.glob(f"{run_id}/opt_tiny-torch-cpu-1x1/round1/results.json")).read_text())
    assert restored["tokens_per_s_per_device"] == round1["metrics"]["tokens_per_s_per_device"]
    for suffix in ("", "-wal", "-shm"):  # the store is lost altogether: rebuilt with its run
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    rebuilt = accelbench("store", "repair", "--log-root", str(log_root))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"run {run_id}: run row rebuilt; {stored} attempt(s) added" in rebuilt.stdout
    (run,) = runs(db)
    assert run["status"] == "done" and run["log_dir"] == str(log_root / run_id)
    report = accelbench("report", run_id, "--db", str(db), "--format", "csv")
    assert report.returncode == 0 and report.stdout.count("opt_tiny:torch:cpu:1:1") == 1
    assert len(report.stdout.strip().splitlines()) == 1 + stored  # a header, then every attempt back


def test_a_locked_store_at_start_waits_a_bounded_time_then_says_so_in_one_message(accelbench, tmp_path):
    """The run is refused at the store's open, before any host: the CLI in this process (no interpreter to start)."""
    log_root = tmp_path / "logs"
    existing_store(log_root)
    new_db = tmp_path / "new.db"
    for db in (log_root / "results.db", new_db):  # an existing WAL store; a file the locker has just created
        locker = Locker(db, 60)
        try:
            began = time.monotonic()
            result = accelbench("run", CASE, *SHORT, "--db", str(db), env={"ACCELBENCH_STORE_WAIT_S": "3"})
            elapsed = time.monotonic() - began
        finally:
            locker.release()
        assert result.returncode == 2, result.stderr
        assert f"accelbench: error: the results store {db} is locked: another process has held a write " \
               "transaction on it for more than 3 s" in result.stderr
        assert "fix: let the other process finish or end it" in result.stderr and "fuser" in result.stderr
        assert "not an accelbench results store" not in result.stderr and "Traceback" not in result.stderr
        assert elapsed < 60
    assert len(rows(log_root / "results.db")) == 1


# ---------------------------------------------------------------- damaged


def corrupt_attempts_page(db: Path) -> None:
    """Garbage over the cell content of the attempts table's root page (its rows live there)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'attempts'").fetchone()
    conn.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size + page_size // 2)
        f.write(bytes((i * 37 + 11) % 256 for i in range(page_size // 2)))


def test_a_damaged_store_is_refused_before_anything_starts_and_repair_rebuilds_it(accelbench, golden_failures,
                                                                                 tmp_path):
    log_root = golden_failures.copy(tmp_path / "logs")  # one real run: its results.json rebuild the store
    db = log_root / "results.db"
    (run_id,) = [r["run_id"] for r in runs(db)]
    stored = len(rows(db))
    corrupt_attempts_page(db)
    refused = accelbench("run", CASE, *SHORT, log_root=log_root)
    assert refused.returncode == 2, refused.stderr
    assert f"accelbench: error: the results store {db} is damaged" in refused.stderr
    assert f"fix: rebuild it from the runs' results.json files: accelbench store repair --db {db}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert [p.name for p in log_root.iterdir() if p.is_dir()] == [run_id]  # no run folder: nothing started
    listed = accelbench("runs", "--db", str(db))
    assert listed.returncode == 2 and "is damaged" in listed.stderr and "Traceback" not in listed.stderr
    repaired = accelbench("store", "repair", "--db", str(db))
    assert repaired.returncode == 0, repaired.stderr
    assert "moved it aside to" in repaired.stdout and f"run {run_id}: run row rebuilt; {stored} attempt(s) added" \
        in repaired.stdout
    assert list(log_root.glob("results.db.damaged-*"))
    listed = accelbench("runs", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and sorted(r["status"] for r in rows(db)) == ["failed", "oom", "unsupported"]


# ---------------------------------------------------------------- killed


def test_an_orchestrator_killed_mid_round_is_marked_killed_at_the_next_open_with_its_finished_rounds(
        accelbench, golden_killed):
    """The session's killed run (tests/goldens.py: SIGKILL while its second case trained, the first case's round
    finished), looked at for the first time here: its store row says running until a command opens the store."""
    log_root, pid = golden_killed.log_root, golden_killed.pid
    db = log_root / "results.db"
    (run,) = runs(db)
    assert run["status"] == "running" and run["orchestrator_pid"] == pid  # nobody has looked yet
    listed = accelbench("runs", "--log-root", str(log_root))
    assert listed.returncode == 0, listed.stderr
    assert f"run {run['run_id']}: marked killed — its orchestrator (pid {pid}" in listed.stderr
    assert "0 attempt(s) added" in listed.stderr  # the finished round had been stored by the run itself
    assert "killed" in listed.stdout
    (run,) = runs(db)
    assert run["status"] == "killed" and run["ended_at"] and "died without ending the run" in run["note"]
    assert [(r["round"], r["status"]) for r in rows(db)] == [(1, "ok")]
    shown = accelbench("show", "last", "--log-root", str(log_root))
    assert shown.returncode == 0 and "killed" in shown.stdout and "note: run" in shown.stdout
    again = accelbench("runs", "--log-root", str(log_root))  # finalized once
    assert "marked" not in again.stderr and len(rows(db)) == 1


def test_a_round_that_finished_but_never_reached_the_store_is_added_when_its_killed_run_is_finalized(
        accelbench, tmp_path):
    log_root = tmp_path / "logs"
    db = existing_store(log_root)
    before = run_folders(log_root)
    proc, err = start_run(log_root, tmp_path, CASE, *SHORT, env={"ACCELBENCH_STORE_RETRY_S": "120"})
    locker = None
    try:
        wait_for(lambda: new_run_stepping(log_root, before), "training", proc=proc)
        locker = Locker(db, 120)
        wait_for(lambda: "retrying round 1" in err.read_text(), "the attempt's retries", proc=proc)
        proc.send_signal(signal.SIGKILL)  # results.json written, the row still waiting for the lock
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if locker is not None:
            locker.release()
        kill_leftovers(log_root)
    (run_id,) = run_folders(log_root) - before
    assert len(rows(db)) == 1
    listed = accelbench("runs", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert f"run {run_id}: marked killed" in listed.stderr and "1 attempt(s) added from its results.json" \
        in listed.stderr
    killed = [r for r in runs(db) if r["run_id"] == run_id][0]
    assert killed["status"] == "killed"
    added = [r for r in rows(db) if r["run_id"] == run_id]
    assert [(r["round"], r["status"]) for r in added] == [(1, "ok")]
    assert "the run's orchestrator had died before storing it" in added[0]["warnings"]
    again = accelbench("store", "repair", "--db", str(db))
    assert f"run {run_id}: 0 attempt(s) added, 1 already stored" in again.stdout and len(rows(db)) == 2


# ---------------------------------------------------------------- disk full


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs just over the 1 GiB preflight asks for, mounted as the log root; unmounted after."""
    with tmpfs(tmp_path / "small-disk", "1100m") as mount_point:
        try:
            yield mount_point
        finally:
            kill_leftovers(mount_point)


def fill(folder: Path) -> None:
    """Take every free byte of the file system (posix_fallocate, then writes until ENOSPC)."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            os.posix_fallocate(f.fileno(), 0, max(shutil.disk_usage(folder).free - 4096, 1))
        except OSError:
            pass
        f.seek(0, os.SEEK_END)
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_disk_that_fills_mid_run_stops_the_run_cleanly_and_keeps_what_was_written(small_disk, tmp_path):
    log_root = small_disk / "logs"
    db = tmp_path / "results.db"  # the store on another file system: it takes the attempt
    # a round long enough to fill the disk in (15 s and more), spent mostly asleep (debug.compute_delay_ms): 200
    # plain steps spun a core for as long
    proc, err = start_run(log_root, tmp_path, "gpt2_tiny:torch:cpu:1:1:2", "--set", "train.steps=60",
                          "--set", "train.warmup_steps=1", "--set", "debug.compute_delay_ms=250", "--db", str(db))
    try:
        wait_for(lambda: new_run_stepping(log_root, set()), "training", proc=proc)
        fill(small_disk)
        stdout, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.read_text()
    assert proc.returncode == 4, stderr
    assert "Traceback" not in stderr and "stored in" not in stdout
    assert "results.json could not be written: No space left on device" in stderr
    assert "stopped: " in stderr and "fix: free space under the log root" in stderr
    assert not list(log_root.rglob("*.tmp"))  # no half-written files left behind
    assert not list(log_root.rglob("results.json"))
    (round_dir,) = log_root.glob("*/*/round1")
    assert (round_dir / "config.json").is_file()  # what was written before is kept
    assert not list(log_root.glob("*/*/round2"))  # the run stopped: round 2 was never started
    (row,) = rows(db)
    assert row["round"] == 1 and "could not be written: No space left on device" in row["warnings"]
    (run,) = runs(db)
    assert run["status"] == "aborted" and run["ended_at"]
    assert leftover_processes(log_root) == []

"""The results store against what it may find instead of a healthy file: a summary.json a full disk left
empty, a store on read-only media, a path that is no file (``--db /dev/null``), an empty file (a second run on
the same machine: tests/test_store_overlap.py). Commands that start nothing run in this process (the
``accelbench`` fixture), real runs as a user runs them (a subprocess): exit 2 and one message with its fix for
what is refused, no traceback."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import write_text_atomically
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.faults import StoreCorrupt, StoreUnavailable
from run_benchmarks.results.store.recovery import summary_state
from run_benchmarks.results.store.schema import row_from_document
from tests.infra.tmpfs import tmpfs

from .conftest import ROOT
from .test_results import document
from .test_store_faults import Locker, fill

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


# ---------------------------------------------------------------- (b) a store on read-only media


_LEAVE_WAL = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint=0")
conn.execute("UPDATE runs SET status = 'done', note = 'only in the wal' WHERE run_id = 'r1'")
os._exit(0)  # no close: the change stays in the -wal file, not merged into the store
"""


@contextmanager
def read_only_store(tmp_path: Path, wal: str = "none") -> Iterator[Path]:
    """A store with one run of one attempt on a tmpfs then remounted read-only (the tests run as root, which
    a chmod does not stop). ``wal``: ``none`` (closed cleanly: the store file alone), ``with-shm`` (a change
    left in its -wal file, with the -shm file beside it), ``without-shm`` (the -wal file alone)."""
    with tmpfs(tmp_path / "archive", "16m") as mount_point:
        db = mount_point / "results.db"
        stored_run(db, ended=wal == "none")
        if wal != "none":
            subprocess.run([sys.executable, "-c", _LEAVE_WAL, str(db)], check=True)
            assert Path(f"{db}-wal").stat().st_size > 0
            if wal == "without-shm":
                os.unlink(f"{db}-shm")
        done = subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        with pytest.raises(OSError):
            (mount_point / "probe").write_text("")
        before = sorted(os.listdir(mount_point))
        yield db
        assert sorted(os.listdir(mount_point)) == before


@pytest.mark.parametrize("wal, status, how", [("none", "done", "as immutable"),
                                              ("with-shm", "done", "opened read-only;"),
                                              ("without-shm", "running", "as immutable")])
def test_a_store_on_read_only_media_is_read_by_runs_show_and_report(accelbench, tmp_path, wal, status, how):
    with read_only_store(tmp_path, wal) as db:
        listed = accelbench("runs", "--db", str(db))
        shown = accelbench("show", "r1", "--db", str(db))
        reported = accelbench("report", "--db", str(db), "--format", "csv")
    for result in (listed, shown, reported):
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert f"the results store {db} is read-only (it is on a read-only file system): opened read-only" \
            in result.stderr and how in result.stderr
        assert "not an accelbench results store" not in result.stderr
    assert "r1" in listed.stdout and status in listed.stdout
    assert "gpt3_tiny" in shown.stdout and "gpt3_tiny" in reported.stdout
    if wal == "with-shm":  # mode=ro reads the -wal file too
        assert "only in the wal" in shown.stdout
    if wal == "without-shm":  # immutable cannot: it says what it cannot see
        assert f"WARNING: {db}-wal" in listed.stderr and "copy results.db and results.db-wal" in listed.stderr


def test_a_store_file_that_may_not_be_written_in_a_writable_folder_is_read_with_mode_ro(accelbench, tmp_path):
    """Another user's file, or an immutable one (chattr +i: what stops root, who runs these tests): SQLite's
    mode=ro reads it and makes its -shm file beside it."""
    db = tmp_path / "results.db"
    stored_run(db)
    done = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here (chattr +i): {done.stderr.strip()}")
    try:
        listed = accelbench("runs", "--db", str(db))
        imported = accelbench("import", str(db), "--format", "torchtitan", "--case-name", CASE, "--db", str(db))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert listed.returncode == 0 and "r1" in listed.stdout, listed.stderr
    assert (f"the results store {db} is read-only (this process may not write the file (its permissions, or an "
            "immutable file)): opened read-only;") in listed.stderr
    refused(imported, f"the results store {db} cannot be written: this process may not write the file")


def test_a_read_only_store_of_an_older_layout_reads_its_new_columns_as_empty(tmp_path):
    """Columns added since (on open of a writable store) cannot be added to a read-only one: read as NULL."""
    with tmpfs(tmp_path / "archive", "16m") as mount_point:
        db = mount_point / "results.db"
        stored_run(db)
        conn = sqlite3.connect(db)
        conn.execute("ALTER TABLE attempts DROP COLUMN record")
        conn.execute("ALTER TABLE attempts DROP COLUMN row_version")
        conn.execute("ALTER TABLE runs DROP COLUMN note")
        conn.commit()
        conn.close()
        subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)
        notes = []
        with ResultStore(db, reader=True, announce=notes.append) as store:
            assert store.read_only == "it is on a read-only file system"
            (attempt,) = store.attempts(run_ids=[store.resolve_run("last")])
            assert attempt.version == 1 and "record: the round record stored whole" in attempt.migrations
            assert attempt.record().case_name == attempt["case_name"] == attempt["record"]["case_name"]
            assert store.run("r1")["note"] is None
        assert len(notes) == 1 and "opened read-only" in notes[0]


def test_writing_commands_refuse_a_read_only_store_with_the_way_out(accelbench, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    with read_only_store(tmp_path) as db:
        imported = accelbench("import", str(log), "--format", "torchtitan", "--case-name", CASE, "--db", str(db))
        repaired = accelbench("store", "repair", "--db", str(db), "--log-root", str(tmp_path))
    for result in (imported, repaired):
        refused(result, f"the results store {db} cannot be written: it is on a read-only file system",
                "copy it (with any -wal file beside it) to a writable folder")


# ---------------------------------------------------------------- (c) a path that is no file


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.db"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [("runs",), ("show", "last"), ("report",), ("compare", "a", "b"),
                                     ("bundle", "last")])
def test_a_db_that_is_a_device_or_a_pipe_is_refused_at_once(accelbench, tmp_path, fifo, command):
    for path, what in (("/dev/null", "a character device"), (str(fifo), "a named pipe (FIFO)")):
        began = time.monotonic()
        result = accelbench(*command, "--db", path)
        refused(result, f"the results store {path} is {what}, not a regular file", "--db ./results.db")
        assert time.monotonic() - began < 20  # no wait for a lock that is not there


def test_writing_commands_refuse_dev_null_instead_of_a_false_lock(accelbench, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    began = time.monotonic()
    imported = accelbench("import", str(log), "--format", "torchtitan", "--case-name", CASE, "--db", "/dev/null",
                          env={"ACCELBENCH_STORE_WAIT_S": "30"})
    err = refused(imported, "the results store /dev/null is a character device, not a regular file")
    assert "locked" not in err and time.monotonic() - began < 20
    ran = accelbench("run", CASE, "--db", "/dev/null")  # refused after preflight, whose warnings may come first
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    assert "accelbench: error: the results store /dev/null is a character device, not a regular file" \
        in ran.stderr and "\n  fix: " in ran.stderr
    assert not ran.log_root.is_dir() or not any(ran.log_root.iterdir())  # refused before any round


def test_a_folder_or_a_broken_link_as_db_is_refused(accelbench, tmp_path):
    folder = tmp_path / "folder.db"
    folder.mkdir()
    refused(accelbench("runs", "--db", str(folder)), f"the results store {folder} is a folder, not a regular file")
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "nowhere" / "results.db")
    refused(accelbench("runs", "--db", str(link)), f"{link} is a symbolic link to {tmp_path / 'nowhere'}")
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    refused(accelbench("import", str(log), "--format", "torchtitan", "--case-name", CASE, "--db", str(link)),
            "which does not exist")
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------- (d) an empty file


@pytest.mark.parametrize("command", [("runs",), ("show", "last"), ("report",)])
def test_reading_commands_refuse_an_empty_file_and_leave_it_as_it_was(accelbench, tmp_path, command):
    db = tmp_path / "results.db"
    db.write_bytes(b"")
    refused(accelbench(*command, "--db", str(db)), f"{db} is an empty file (0 bytes), not a results store")
    assert db.stat().st_size == 0 and sorted(os.listdir(tmp_path)) == ["results.db", "system-tmp"]


def test_writing_commands_refuse_an_empty_file_and_repair_rebuilds_it(accelbench, tmp_path):
    db = tmp_path / "results.db"
    db.write_bytes(b"")
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    refused(accelbench("import", str(log), "--format", "torchtitan", "--case-name", CASE, "--db", str(db)),
            f"the results store {db} is an empty file (0 bytes), not a results store", f"rm {db}",
            "accelbench store repair")
    assert db.stat().st_size == 0
    refused(accelbench("run", CASE, "--db", str(db)), "is an empty file (0 bytes)")
    assert db.stat().st_size == 0
    with pytest.raises(StoreCorrupt):
        ResultStore(db)
    with pytest.raises(UserError, match="empty file"):
        ResultStore(db, reader=True)
    (tmp_path / "logs").mkdir(exist_ok=True)
    repaired = accelbench("store", "repair", "--db", str(db), "--log-root", str(tmp_path / "logs"))
    assert repaired.returncode == 0, repaired.stderr
    assert "moved it aside" in repaired.stdout and db.stat().st_size > 0
    assert [p.stat().st_size for p in tmp_path.glob("results.db.damaged-*")] == [0]


def test_an_empty_file_another_process_holds_is_a_store_being_made_and_waited_for(tmp_path):
    """An sqlite3 shell (or an older accelbench) makes the file before it writes it: locked, it is waited for
    and said to be locked, not refused as empty; once let go and still empty, it is refused."""
    db = tmp_path / "results.db"
    locker = Locker(db, 60)
    try:
        assert db.stat().st_size == 0
        with pytest.raises(StoreUnavailable, match="is locked: another process has held a write transaction"):
            ResultStore(db, wait_s=1)
    finally:
        locker.release()
    with pytest.raises(StoreCorrupt, match="is an empty file"):
        ResultStore(db, wait_s=1)


_CREATE = """
import sys, time
from run_benchmarks.results.store.store import ResultStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
with ResultStore(sys.argv[1]) as store:
    store.begin_run(sys.argv[3], "2026-11-23T10:00:00+00:00", [], None, None)
"""


def test_a_new_store_is_never_seen_empty_even_when_several_processes_make_it_at_once(tmp_path):
    """A store is made whole beside its path and linked into place: a reader never meets an empty file (the
    rule above would refuse it), and processes racing to make it all end in one store."""
    db = tmp_path / "new" / "results.db"
    at = time.time() + 2.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _CREATE, str(db), str(at), f"run{i}"], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    seen_empty = False
    while any(p.poll() is None for p in procs):
        try:
            seen_empty |= db.stat().st_size == 0
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    for proc in procs:
        assert proc.wait() == 0, proc.stderr.read()
    assert not seen_empty
    with ResultStore(db) as store:
        assert sorted(r["run_id"] for r in store.runs()) == ["run0", "run1", "run2", "run3"]
    assert [name for name in os.listdir(db.parent) if name.startswith(".")] == []  # no temporary store left


def test_a_reader_never_makes_a_store(tmp_path):
    with pytest.raises(UserError, match="no results store at"):
        ResultStore(tmp_path / "results.db", reader=True)
    assert not (tmp_path / "results.db").exists()

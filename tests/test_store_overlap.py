"""A second run on the same machine (moved from tests/test_store_hostile.py, section (e), each test as it was):
the run that started first records the runs that overlapped its rounds, runs on other hosts are not named,
and two real runs at once each name the other."""
from __future__ import annotations

import os
import signal
import socket

import psutil

from run_benchmarks.results.store.schema import row_from_document
from run_benchmarks.results.store.store import ResultStore

from .test_results import document
from .test_store_faults import kill_leftovers, new_run_stepping, start_run, wait_for
from .test_store_hostile import CASE, dead_orchestrator


def attempt_fields(run_id: str, started: str, ended: str, warnings=(), host: str = "localhost") -> dict:
    doc = document(run_id, "gpt3_tiny", "torch", 0.5)
    doc.update(started_at=started, ended_at=ended, warnings=list(warnings))
    doc["environment"]["nodes"] = [{"node_rank": 0, "host": host}]
    return row_from_document(doc)


def t(seconds: int) -> str:
    return f"2026-11-23T10:{seconds // 60:02d}:{seconds % 60:02d}+00:00"


def test_the_run_that_started_first_records_the_runs_that_overlapped_its_rounds(tmp_path):
    me = (socket.gethostname(), os.getpid(), psutil.Process().create_time())  # alive: still running
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        store.begin_run("first", t(0), [], None, None, orchestrator=me)
        store.begin_run("second", t(100), [], None, None, orchestrator=me)   # during round 2 of first
        store.begin_run("before", t(0), [], None, None, orchestrator=me)
        store.end_run("before", t(10))                                       # over before round 2 began
        store.begin_run("after", t(300), [], None, None, orchestrator=me)    # after round 2 ended
        store.begin_run("elsewhere", t(100), [], None, None, orchestrator=("other-host", 1, 1.0))
        store.begin_run("died", t(5), [], None, None, orchestrator=dead_orchestrator())  # never ended
        store.begin_run("imported", t(100), [], None, None)                  # no orchestrator: an import
        store.add_attempt(attempt_fields("first", t(20), t(90)))             # round 1: alone
        store.add_attempt(attempt_fields("first", t(95), t(200)))            # round 2: beside "second"
        store.add_attempt(attempt_fields("second", t(110), t(150),
                                         ["another run's workers are still running on localhost: pids 1 "
                                          "(run first, still running from pid 1 on h); figures may be low"]))
        store.end_run("second", t(160))
        store.add_attempt(attempt_fields("first", t(210), t(280)))           # round 3: "second" had ended
        rows = {(a["run_id"], a["round"], a["started_at"]): a for a in store.attempts()}
    one, two, three = (rows[("first", 1, s)] for s in (t(20), t(95), t(210)))
    assert one["warnings"] == [] and three["warnings"] == []
    (warning,) = two["warnings"]
    assert warning.startswith(f"another run, second, ran on this machine ({socket.gethostname()}) during this "
                              f"attempt ({t(100)} -> running, orchestrator pid {os.getpid()})")
    assert two.record().warnings == two["warnings"]  # the whole record says it too
    (said,) = rows[("second", 1, t(110))]["warnings"]  # preflight named "first" already: not twice
    assert said.startswith("another run's workers")


def test_runs_whose_nodes_were_on_other_hosts_are_not_named(tmp_path):
    me = (socket.gethostname(), os.getpid(), psutil.Process().create_time())
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        store.begin_run("first", t(0), [], None, None, orchestrator=me)
        store.begin_run("remote", t(5), [], None, None, orchestrator=me)
        store.add_attempt(attempt_fields("remote", t(6), t(50), host="gpu-node-7"))
        store.add_attempt(attempt_fields("first", t(1), t(60), host="localhost"))
        (first,) = store.attempts(run_ids=["first"])
    assert first["warnings"] == []


def test_two_real_runs_at_once_each_name_the_other(cli, tmp_path):
    """The first run is still in its round when the second starts and ends: the second finds the first's
    workers at preflight, and the first's row (stored when it is stopped) names the second."""
    log_root = tmp_path / "logs"
    first, err = start_run(log_root, tmp_path, CASE, "--set", "train.steps=100000", "--set",
                           "train.warmup_steps=1")
    try:
        wait_for(lambda: new_run_stepping(log_root, set()), "the first run's training", proc=first)
        (first_id,) = (p.name for p in log_root.iterdir() if p.is_dir())
        second = cli("run", CASE, "--set", "train.steps=4", "--set", "train.warmup_steps=1")
        assert second.returncode == 0, second.stderr
        first.send_signal(signal.SIGINT)  # its round ends now, interrupted, and is stored
        first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        kill_leftovers(log_root)
    (second_id,) = {p.name for p in log_root.iterdir() if p.is_dir()} - {first_id}
    with ResultStore(log_root / "results.db") as store:
        (first_row,) = store.attempts(run_ids=[first_id])
        (second_row,) = store.attempts(run_ids=[second_id])
    assert first_row["status"] == "interrupted"
    assert any(w.startswith(f"another run, {second_id}, ran on this machine") for w in first_row["warnings"]), \
        first_row["warnings"]
    assert any(f"run {first_id}" in w for w in second_row["warnings"]), second_row["warnings"]

"""Real runs that others run beside, or that lose their test (issue 43).

Three runs at once on one store: the first says on its terminal, as it runs, that the others started beside it
(the later ones say it at their preflight), and each one's row names the others. A suite killed mid-test (a CI
deadline's SIGKILL to pytest) leaves no run training: every run a test starts dies with its test (tests/runner.py
``ends_with_the_test``); here a pytest of one test that starts a run is killed while the run trains.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from run_benchmarks.results.store.store import ResultStore

from .runner import ROOT
from .signal_faults import run_processes, seconds_until_gone
from .test_store_faults import kill_leftovers, new_run_stepping, start_run, wait_for

CASE = "gpt2_tiny:torch:cpu:1:1"
# The first run trains until it is stopped, all the while the other two run: each of its steps sleeps (a
# straggler's delay, debug.compute_delay_ms) so that it keeps its round open without taking the cores the
# others start, train and end on (without it, it trained flat out for as long as the others took; at 0.5 s a
# step its ~100 steps still cost ~3 s of CPU more than a short run's, at 2 s a quarter of that).
LONG = ("--set", "train.steps=100000", "--set", "train.warmup_steps=1", "--set", "debug.compute_delay_ms=2000")
# One OpenMP thread for each of the three runs, as torchrun gives each rank of a launch of several: beside each
# other and the other lanes, two threads spinning at every barrier cost ~3x the CPU (test_loss_runs measured it).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
SHORT = ("--set", "train.steps=4", "--set", "train.warmup_steps=1")


def test_the_first_of_three_runs_at_once_says_live_that_the_others_started_beside_it(tmp_path):
    """The first is still in its round while the second and third start and end: they find its workers at
    preflight; it says each of them on its terminal as it sees them start, and its row (stored when it is
    stopped) names both."""
    log_root = tmp_path / "logs"
    first, first_err = start_run(log_root, tmp_path, CASE, *LONG, env=ONE_THREAD)
    try:
        wait_for(lambda: new_run_stepping(log_root, set()), "the first run's training", proc=first)
        (first_id,) = (p.name for p in log_root.iterdir() if p.is_dir())
        others = [start_run(log_root, tmp_path, CASE, *SHORT, env=ONE_THREAD) for _ in range(2)]
        for proc, err in others:
            proc.communicate(timeout=300)
            assert proc.returncode == 0, err.read_text()[-3000:]
        other_ids = sorted({p.name for p in log_root.iterdir() if p.is_dir()} - {first_id})
        said = [f"another run, {run_id}, started on this machine at" for run_id in other_ids]
        wait_for(lambda: all(s in first_err.read_text() for s in said), "the first run's live lines", timeout=30,
                 proc=first)
        first.send_signal(signal.SIGINT)  # its round ends now, interrupted, and is stored
        first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        kill_leftovers(log_root)
    live = [line for line in first_err.read_text().splitlines() if "started on this machine" in line]
    assert len(live) == 2 and all("figures from now on may be low" in line for line in live), live
    assert all("while round 1 of gpt2_tiny:torch:cpu:1:1 runs" in line for line in live)
    with ResultStore(log_root / "results.db") as store:
        (first_row,) = store.attempts(run_ids=[first_id])
        second_rows = [a for run_id in other_ids for a in store.attempts(run_ids=[run_id])]
    assert first_row["status"] == "interrupted"
    for run_id in other_ids:
        assert any(w.startswith(f"another run, {run_id}, ran on this machine") for w in first_row["warnings"]), \
            first_row["warnings"]
    for row in second_rows:
        assert any(f"run {first_id}" in w for w in row["warnings"]), row["warnings"]


VICTIM = '''
import time
from pathlib import Path

from tests.signal_faults import LONG, start


def test_a_run_that_outlives_nothing():
    start(Path({work!r}), "gpt2_tiny:torch:cpu:1:1", *LONG)
    time.sleep(3600)  # the outer test kills this pytest while the run trains
'''


def test_a_run_a_test_started_ends_seconds_after_its_pytest_is_killed(tmp_path):
    """A pytest (as a lane runs it) whose test starts a long run, as test_signals' runs are started (a session
    of its own), SIGKILLed while the run trains: the run's orchestrator gets SIGTERM from the kernel, stops its
    nodes as on Ctrl-C, and nothing of it is left within seconds."""
    work = tmp_path / "victim"
    work.mkdir()
    victim = tmp_path / "victim_test.py"
    victim.write_text(VICTIM.format(work=str(work)))
    lane_log = tmp_path / "lane.log"
    with open(lane_log, "wb") as out:
        lane = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                 "--rootdir", str(tmp_path), str(victim)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    log_root = work / "logs"
    try:
        if not _stepping(log_root, lane):
            pytest.fail(f"the victim's run never trained:\n{lane_log.read_text()[-3000:]}\n"
                        f"{(work / 'orchestrator.err').read_text()[-3000:] if (work / 'orchestrator.err').exists() else ''}")
        orchestrators = [line for line in run_processes(lane.pid, [log_root]) if "run_benchmarks.cli" in line]
        assert len(orchestrators) == 1, orchestrators
        orchestrator = int(orchestrators[0].split()[0])
        began = time.monotonic()
        os.killpg(lane.pid, signal.SIGKILL)  # what a CI deadline does to a lane
        lane.wait(timeout=30)
        took, left = seconds_until_gone(lambda: run_processes(orchestrator, [log_root, work]) + (
            [f"{orchestrator} the orchestrator"] if _alive(orchestrator) else []), 30)
        took = time.monotonic() - began
    finally:
        if lane.poll() is None:
            os.killpg(lane.pid, signal.SIGKILL)
        kill_leftovers(log_root)
    assert left == [], f"still running {took:.1f} s after the lane's SIGKILL: {left}"
    assert took < 20, took
    (stderr,) = [p.read_text() for p in [work / "orchestrator.err"]]
    assert "accelbench: SIGTERM: stopping every node" in stderr, stderr[-2000:]


def _stepping(log_root, lane: subprocess.Popen, timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and lane.poll() is None:
        if new_run_stepping(log_root, set()):
            return True
        time.sleep(0.2)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for what this test asks (its parent, the killed pytest, no longer reaps it)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

"""The reaper (run_benchmarks/backends/hosts/reaper.py), the one script that finds and ends accelbench's
processes, in each of its modes on real processes of this machine: ``stop`` (Host.stop over SSH), ``scan``
(the leftover check and ``accelbench clean``) and ``guard`` (the parent-death guard)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

from run_benchmarks.backends.hosts import reaper
from run_benchmarks.backends.hosts.guard import orchestrator_tag

from .infra.cleans import cleans_held

STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ignoring', flush=True); "
            "time.sleep(120)")


def start(tag: str, owner: str = "", stubborn: bool = False) -> subprocess.Popen:
    """A tagged process; a stubborn one is returned once it ignores TERM (it says so): a fixed 0.5 s was not
    always enough for an interpreter to start beside CI's lanes, and TERM then ended it at once (the hurried
    stop below then saw no second signal, which came after the test had restored SIGINT's handler)."""
    env = {**os.environ, "ACCELBENCH_JOB_TAG": tag, "ACCELBENCH_RUN_ID": "r1", "ACCELBENCH_ORCHESTRATOR": owner}
    if not stubborn:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    process = subprocess.Popen([sys.executable, "-c", STUBBORN], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ignoring\n"
    return process


def gone(process: subprocess.Popen, within_s: float = 10) -> bool:
    try:
        process.wait(timeout=within_s)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        return False


def test_stop_ends_the_tags_processes_and_kills_one_that_ignores_term():
    tag = f"test-{uuid.uuid4().hex}"
    polite, stubborn, other = start(tag), start(tag, stubborn=True), start(f"test-{uuid.uuid4().hex}")
    began = time.monotonic()
    subprocess.run(reaper.stop_argv(sys.executable, tag, 0.5), check=True, timeout=30)
    assert gone(polite, 1) and gone(stubborn, 1) and time.monotonic() - began < 8
    assert other.poll() is None  # another job's process is left alone
    other.kill()
    other.wait()


def test_scan_lists_owners_and_kill_ends_only_those_whose_orchestrator_is_dead():
    """The kill is ``accelbench clean``'s: it ends every dead run's process on this machine, other lanes' orphans
    too (test_signals' must live until its run warned of it), and their cleans would end this test's orphan
    before its scan: the cleans wait while this test runs (tests/infra/cleans.py)."""
    tag = f"test-{uuid.uuid4().hex}"
    dead_owner = orchestrator_tag().rsplit(":", 2)[0] + ":999999999:1"  # this machine, a pid that cannot be
    with cleans_held():
        alive, orphan = start(tag, owner=orchestrator_tag()), start(tag, owner=dead_owner)
        try:
            time.sleep(0.3)
            found = json.loads(subprocess.run(reaper.scan_argv(sys.executable), capture_output=True, text=True,
                                              check=True, timeout=30).stdout)
            mine = {p["pid"]: p for p in found["processes"] if p["pid"] in (alive.pid, orphan.pid)}
            assert (mine[alive.pid]["alive"], mine[orphan.pid]["alive"]) == (True, False)
            assert mine[orphan.pid]["run"] == "r1"
            subprocess.run(reaper.scan_argv(sys.executable, kill=True), capture_output=True, check=True, timeout=30)
            assert gone(orphan, 5) and alive.poll() is None
        finally:
            for process in (alive, orphan):
                process.kill()
                process.wait()


def test_the_guard_ends_the_tag_at_the_end_of_its_stdin_unless_disarmed_first():
    for disarm, ended in ((b"", True), (b"d", False)):
        tag = f"test-{uuid.uuid4().hex}"
        worker = start(tag)
        guard = subprocess.Popen(reaper.guard_argv(sys.executable, tag, 1.0), stdin=subprocess.PIPE,
                                 env={**os.environ, "ACCELBENCH_JOB_TAG": tag})
        guard.stdin.write(disarm)
        guard.stdin.close()  # what the orchestrator's death does to the pipe
        assert guard.wait(timeout=20) == 0
        assert gone(worker, 3 if ended else 1) == ended
        if not ended:
            worker.kill()
            worker.wait()


def test_a_guard_with_a_command_exits_with_its_code():
    guard = subprocess.Popen(reaper.guard_argv(sys.executable, f"test-{uuid.uuid4().hex}", 1.0, (),
                                               [sys.executable, "-c", "raise SystemExit(7)"]), stdin=subprocess.PIPE)
    assert guard.wait(timeout=20) == 7
    guard.stdin.close()


def test_a_local_stop_is_the_reapers_and_a_second_signal_cuts_its_grace_short():
    """hosts/local.py stops a job with the reaper (``stop_here``), as SSH does: the tag's processes end, one
    that ignores TERM is killed after the grace; once a signal arrived, a second one while the stop waits starts
    a stop with no grace beside it, so a 60 s grace ends in seconds (the person wants the run over)."""
    import signal
    import threading

    from run_benchmarks import signals

    tag = f"test-{uuid.uuid4().hex}"
    polite, stubborn = start(tag), start(tag, stubborn=True)
    began = time.monotonic()
    reaper.stop_here(tag, 0.5)
    assert gone(polite, 1) and gone(stubborn, 1) and time.monotonic() - began < 8
    restore = signals.install(notify=lambda message: None)
    try:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler raises in the main thread at the next bytecode
        except signals.Interrupted:
            pass
        stubborn = start(tag, stubborn=True)
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        began = time.monotonic()
        reaper.stop_here(tag, 60)
        assert signals.hurried() and gone(stubborn, 1) and time.monotonic() - began < 10
    finally:
        restore()

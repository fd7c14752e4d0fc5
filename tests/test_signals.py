"""Fault injection: the orchestrator (a real ``accelbench run`` subprocess) gets SIGTERM, SIGHUP, SIGKILL
or a double Ctrl-C mid-round, locally, over SSH (real sshd) and with nodes in containers (real dockerd).

Handled signals end the run as Ctrl-C does (nodes stopped, logs collected, round ``interrupted``, exit
128 + the signal); SIGKILL leaves nothing running for long (the parent-death guards). Each run trains a
few steps only: it is signalled as soon as the first step record appears (SIGKILL, which needs no step: as
soon as its workers have started). One local run takes TERM, then Ctrl-C and TERM while it stops.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import psutil
import pytest


from .conftest import ROOT, write
from .signal_faults import LONG, dead_orchestrator, run_containers, run_processes, seconds_until_gone, start, \
    until_said, wait_for_step, wait_for_workers
from .goldens import LOCAL_GONE_S
from .infra.cleans import clean_turn, cleans_held

HANDLED = {"SIGTERM": (signal.SIGTERM, 143), "SIGHUP": (signal.SIGHUP, 129)}
REMOTE_GONE_S = 10.0


def interrupted_doc(log_root: Path) -> dict:
    (path,) = log_root.glob("*/*/round1/results.json")
    return json.loads(path.read_text())


def stored_status(log_root: Path) -> list[str]:
    from run_benchmarks.results.store.store import ResultStore

    with ResultStore(log_root / "results.db") as store:
        return [a.row["status"] for a in store.attempts()]


def assert_ended_like_ctrl_c(orch, code: int) -> dict:
    stderr = orch.stderr()
    assert orch.process.returncode == code, stderr[-3000:]
    assert "Traceback (most recent call last)" not in stderr, stderr[-3000:]
    doc = interrupted_doc(orch.log_root)
    assert doc["status"] == "interrupted" and doc["steps_completed"] >= 1, doc["reason"]
    assert stored_status(orch.log_root) == ["interrupted"]
    return doc


# ---------------------------------------------------------------- this machine


def _orphan() -> subprocess.Popen:
    """A worker left by a run whose orchestrator was killed (before guards existed, or on a guard-less host)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env={
        **os.environ, "ACCELBENCH_JOB_TAG": "accelbench-test-orphan", "ACCELBENCH_RUN_ID": "20200101-000000-dead",
        "ACCELBENCH_ORCHESTRATOR": dead_orchestrator()}, start_new_session=True)


@pytest.fixture(scope="module")
def stopped_local_run(tmp_path_factory):
    """One local 1x2 run stopped in a hurry: TERM once it trains, Ctrl-C while it stops, then TERM again. The
    first signal decides the ending (143); the later ones only cut the stop's grace short. It starts beside
    a worker a killed run left (``orphan``). Three tests read it: a real TERM ends the run as Ctrl-C does, a
    second signal does not cut the cleanup short, and the run warns about the orphan (which `clean` ends).
    Other lanes' cleans (which end every dead run's process on this machine) wait until that test has
    cleaned (``release_cleans``) or the module ends."""
    with ExitStack() as hold:
        hold.enter_context(cleans_held())
        orphan = _orphan()
        orch = start(tmp_path_factory.mktemp("stopped-local"), "gpt2_tiny:torch:cpu:1:2", *LONG)
        try:
            wait_for_step(orch, [orch.log_root])
            # each signal once the one before was handled (its line on stderr), not 0.3 s later: two signals
            # pending at once are handled lowest number first, SIGINT before SIGTERM, and would decide 130
            os.kill(orch.pid, signal.SIGTERM)
            until_said(orch, "SIGTERM: stopping every node")
            os.kill(orch.pid, signal.SIGINT)
            until_said(orch, "SIGINT again: killing what is left now")
            os.kill(orch.pid, signal.SIGTERM)
            orch.wait(timeout=120)
            _, left = seconds_until_gone(lambda: run_processes(orch.pid, [orch.log_root]), LOCAL_GONE_S)
            yield orch, left, orphan, hold.close
        finally:
            for process in (orch.process, orphan):
                if process.poll() is None:
                    process.kill()
                    process.wait()


def test_the_next_run_warns_about_a_dead_runs_workers_and_clean_ends_them(stopped_local_run, cli):
    """The run of stopped_local_run started beside a killed run's worker (any run warns at its start: it was a
    1x1 run of its own). No other test's clean has run since the orphan started (the fixture holds them off)."""
    orch, _, orphan, release_cleans = stopped_local_run
    try:
        doc = interrupted_doc(orch.log_root)
        # (other runs on this machine may be warned about too: pick the one about the orphan's run)
        warning = next(w for w in doc["warnings"] if "20200101-000000-dead" in w)
        assert warning.startswith("another run's workers are still running on localhost: 1 process(es) (run "
                                  "20200101-000000-dead; ")  # one short line: its pids are for show --verbose
        assert "is gone" in warning and "figures may be low" in warning and str(orphan.pid) not in warning
        assert "another run's workers are still running on localhost" in orch.stderr()  # on the terminal too
        shown = cli("show", "last", "--db", str(orch.log_root / "results.db"), "--verbose")
        assert f"run 20200101-000000-dead, pids {orphan.pid}: " in shown.stdout
        assert orphan.poll() is None  # a run only warns
        cleaned = cli("clean")
        assert cleaned.returncode == 0 and f"ended pid {orphan.pid}" in cleaned.stdout, cleaned.stdout
        assert orphan.wait(timeout=10) == -signal.SIGTERM
    finally:
        release_cleans()


def test_term_ends_a_local_run_like_ctrl_c(stopped_local_run):
    orch, left, *_ = stopped_local_run
    sig, code = HANDLED["SIGTERM"]
    assert_ended_like_ctrl_c(orch, code)
    node_dir = next(orch.log_root.glob("*/*/round1/localhost_noderank0"))
    for rank in (0, 1):  # the rank logs were gathered out of torchrun's folders, as after any round
        assert '"kind":"step"' in (node_dir / f"rank{rank}.stdout.log").read_text()
    assert (node_dir / "monitor" / "host.jsonl").is_file()
    assert left == [], left


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_every_handled_signal_interrupts_the_same_way_with_its_own_exit_code(name):
    """One handler serves INT, TERM and HUP (signals._handler): the real runs above and below send INT and
    TERM; here each signal, HUP too, goes through that handler in this process and comes out as the
    Interrupted the rounds catch, with 128 + its number as the exit code and its name as the reason."""
    from run_benchmarks import signals

    sig = getattr(signal, name)
    restore = signals.install(notify=lambda message: None)
    try:
        with pytest.raises(signals.Interrupted) as caught:
            os.kill(os.getpid(), sig)
            time.sleep(1)  # the handler runs in the main thread at the next bytecode
        assert caught.value.signum == sig and signals.received() == sig
        assert signals.exit_code(signals.received()) == {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}[name]
        assert f"{signal.Signals(caught.value.signum).name} received" == f"{name} received"
    finally:
        restore()


def test_sigkill_of_a_local_orchestrator_leaves_nothing_running(golden_killed):
    assert len(golden_killed.processes_before) >= 4  # launcher, 2 workers, monitor (+ guards)
    assert golden_killed.left == [], \
        f"still running {golden_killed.seconds_until_gone:.1f} s after SIGKILL: {golden_killed.left}"


def test_a_second_ctrl_c_does_not_cut_the_cleanup_short(stopped_local_run):
    """Ctrl-C (then TERM) while a TERM stops the run (stopped_local_run): exit 143, every node stopped, the
    logs collected and the round and run recorded interrupted, no traceback. A real first Ctrl-C's 130 is
    test_signals_leave_no_container_of_the_run[SIGINT]'s (and the one handler's, in-process, above)."""
    orch, left, *_ = stopped_local_run
    assert_ended_like_ctrl_c(orch, 143)  # the first signal decides the exit code
    node_dir = next(orch.log_root.glob("*/*/round1/localhost_noderank0"))
    assert (node_dir / "rank0.stdout.log").is_file() and (node_dir / "rank1.stdout.log").is_file()
    assert "SIGINT again: killing what is left now" in orch.stderr()
    assert (orch.log_root / orch.run_id() / "summary.json").is_file()
    from run_benchmarks.results.store.store import ResultStore

    with ResultStore(orch.log_root / "results.db") as store:
        assert store.runs()[0]["status"] == "interrupted"
    assert left == [], left


def test_a_run_refused_at_preflight_gives_the_caller_its_handlers_back(accelbench, tmp_path, monkeypatch):
    """A caller of cli.dispatch in its own process (these tests, through the accelbench fixture) has handlers of
    its own: a run installs accelbench's before preflight and, refused there (an SSH host it cannot trust),
    puts the caller's back. Only a signal keeps them, until the process has left (cli.main)."""
    from run_benchmarks import signals

    installed = []
    install = signals.install
    monkeypatch.setattr(signals, "install", lambda *args: installed.append(args) or install(*args))

    def mine(signum, frame):
        pass

    callers = {sig: signal.signal(sig, mine) for sig in signals.HANDLED}
    try:
        cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: far, backend: ssh, address: 127.0.0.1, "
                                                   f"port: 1, known_hosts: {tmp_path / 'none'}}}\n")
        result = accelbench("run", "gpt2_tiny:torch:cpu:1:1", "--cluster", str(cluster))
        assert result.returncode == 2 and result.stderr.startswith("accelbench: error: host far"), result.stderr
        assert installed, "the run was refused before it installed its handlers: the test proves nothing"
        assert {sig: signal.getsignal(sig) for sig in signals.HANDLED} == {sig: mine for sig in signals.HANDLED}
    finally:
        for sig, handler in callers.items():
            signal.signal(sig, handler)


def test_a_monitor_whose_parent_died_stops_by_itself(tmp_path):
    # The monitor's own check, beside the guards: started by a parent that then dies.
    out = tmp_path / "monitor"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'training.monitor', '--interval', '0.2', '--out', {str(out)!r}],"
        " start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(300)\n")], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    monitor_pid = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while not (out / "host.jsonl").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    parent.kill()
    parent.wait()
    assert seconds_until_gone(lambda: [1] if psutil.pid_exists(monitor_pid) and
                              psutil.Process(monitor_pid).status() != psutil.STATUS_ZOMBIE else [], 5)[1] == []


# ---------------------------------------------------------------- over SSH


def test_sigkill_over_ssh_leaves_no_remote_process(sshd, tmp_path):
    """SIGKILL leaves the hosts' watchdogs to end the remote trees; it is sent once both nodes' workers have
    started (no step needed). A handled signal over SSH (TERM; INT and HUP take the same handler: see above)
    is tests/test_ssh_stop.py's: every remote node stopped, the logs fetched over SFTP, nothing left."""
    work = tmp_path / "hosts-work"
    cluster = write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=2, python=sys.executable, work_root=str(work)))
    orch = start(tmp_path, "gpt2_tiny:torch:cpu:2:1", *LONG, "--cluster", str(cluster))
    wait_for_workers(orch, [work], count=2)
    assert run_processes(orch.pid, [work])  # the remote launchers, workers and monitors
    os.kill(orch.pid, signal.SIGKILL)
    orch.wait(timeout=10)
    took, left = seconds_until_gone(lambda: run_processes(orch.pid, [work, orch.log_root]), REMOTE_GONE_S)
    assert left == [], f"still running {took:.1f} s after SIGKILL: {left}"


# ---------------------------------------------------------------- containers


@pytest.fixture
def container_cluster(sshd, engine, tmp_path):
    """One SSH host (h0) whose nodes run in containers."""
    return write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=1, work_root=str(tmp_path / "hosts-work"),
                                                              runtime="container", docker_host=engine.docker_host))


@pytest.mark.parametrize("name", ["SIGINT", "SIGKILL"])
def test_signals_leave_no_container_of_the_run(container_cluster, engine, cpu_torch_image, tmp_path, name):
    """Ctrl-C stops every container and brings back the logs made before the stop; SIGKILL leaves the
    host's guards to remove the containers, and the next `clean` the bridge folders. SIGKILL needs no step:
    it is sent once the node's worker has started. One node on an SSH host, in a container beside its
    monitor's: each container has a guard of its own, on its own host's connection, so a second node would
    repeat the same; the ending of two SSH hosts' nodes is test_sigkill_over_ssh_leaves_no_remote_process's
    and tests/test_ssh_stop.py's, a stop of every node's container the container golden's crash's
    (tests/test_containers.py)."""
    work = tmp_path / "hosts-work"
    orch = start(tmp_path, "gpt2_tiny:torch_2.13:cpu:1:1", *LONG, "--cluster", str(container_cluster))
    if name == "SIGKILL":
        wait_for_workers(orch, [work], count=1, timeout=600)
    else:
        wait_for_step(orch, [work], timeout=600)
    run_id = orch.run_id()
    seconds_until_gone(lambda: [] if len(run_containers(engine.docker_host, run_id)) >= 2 else ["not yet"], 30)
    assert len(run_containers(engine.docker_host, run_id)) == 2  # the node's and its monitor's
    if name == "SIGKILL":
        os.kill(orch.pid, signal.SIGKILL)
        orch.wait(timeout=10)
    else:
        os.kill(orch.pid, signal.SIGINT)
        orch.wait(timeout=120)
        doc = assert_ended_like_ctrl_c(orch, 130)
        node_dir = next(orch.log_root.glob("*/*/round1/h0_noderank0"))
        assert '"kind":"step"' in (node_dir / "rank0.stdout.log").read_text()  # logs made before the stop
        assert doc["steps_completed"] >= 1
    # SIGKILL: the guards on the hosts remove the containers once the SSH connections drop.
    took, left = seconds_until_gone(lambda: run_containers(engine.docker_host, run_id) +
                                    run_processes(orch.pid, [work, orch.log_root]), REMOTE_GONE_S)
    assert left == [], f"still there {took:.1f} s after {name}: {left}"
    if name == "SIGKILL":  # the bridge folders of the killed orchestrator go at the next clean
        with clean_turn():  # the folders read while no other lane's clean removes one of them
            cleaned = subprocess.run([sys.executable, "-m", "run_benchmarks.cli", "clean", "--cluster",
                                      str(container_cluster)], capture_output=True, text=True, timeout=120,
                                     cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert cleaned.returncode == 0, cleaned.stderr
            for folder in Path("/tmp").glob("accelbench-docker-*"):
                owner = (folder / "owner").read_text() if (folder / "owner").is_file() else ""
                assert not owner.startswith(f"{socket.gethostname()}:{orch.pid}:"), folder


def test_clean_removes_containers_of_a_dead_orchestrator_and_keeps_their_output(cli, engine, tmp_path):
    import docker

    from run_benchmarks.backends.runtimes.docker import LABEL_HOST, LABEL_LOG, LABEL_PID, LABEL_RUN, LABEL_START
    from tests.infra.docker_engine import BASE_IMAGE

    host, pid, start_ticks = dead_orchestrator().rsplit(":", 2)
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    client = docker.DockerClient(base_url=engine.docker_host)
    name = "accelbench-20200101-000000-dead-case-r1-n0"
    try:
        client.containers.run(BASE_IMAGE, ["python3", "-c", "print('last words', flush=True); "
                                                            "import time; time.sleep(300)"],
                              name=name, detach=True, labels={
                                  "accelbench": "node", LABEL_RUN: "20200101-000000-dead", LABEL_HOST: host,
                                  LABEL_PID: pid, LABEL_START: start_ticks, LABEL_LOG: str(node_dir)})
        stale = Path("/tmp/accelbench-docker-testdead")
        stale.mkdir(exist_ok=True)
        (stale / "owner").write_text(f"{host}:{pid}:{start_ticks}")
        time.sleep(1)
        with clean_turn():
            result = cli("clean", "--docker-host", engine.docker_host)
        assert result.returncode == 0, result.stderr
        assert f"removed container {name}" in result.stdout and "is gone" in result.stdout
        assert "last words" in (node_dir / f"{name}.recovered.log").read_text()
        assert not stale.exists()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(name)
    finally:
        try:
            client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass
        client.close()

"""Rendezvous ports: distinct, free, and never from the range the kernel gives to outgoing connections
(a sweep's later point once failed with its planned port taken by a client socket in between); with
``master_port: auto``, chosen on the master host when each round starts, never by the planner, and recorded
with the round."""
from __future__ import annotations

import dataclasses
import random
import re
import socket
import subprocess
import sys
import time

import pytest

from training.contract import ports
from training.contract.names import PORT_SCRIPT

from .conftest import ROOT, write
from .test_plan import build


def test_ports_are_distinct_free_and_outside_the_ephemeral_range():
    low, high = ports.ephemeral_range()
    picked = ports.free_ports(500)
    assert len(set(picked)) == 500
    assert all(not low <= p <= high and p >= ports.LOWEST for p in picked)
    assert all(ports.bindable(p) for p in picked[:20])


def test_a_port_something_listens_on_is_never_picked(monkeypatch):
    # the taken port's neighbours are two ports picked outside the ephemeral range, not taken + 1 and + 2: those are
    # in it, where the other lanes' connections (sshd, Docker, PostgreSQL) and their TIME_WAITs hold ports
    free = ports.free_ports(2)
    with socket.socket() as server:
        server.bind(("", 0))
        server.listen()
        taken = server.getsockname()[1]
        monkeypatch.setattr(ports, "candidate_ports", lambda _: [taken, *free])
        picked = ports.free_ports(2, random.Random(0))
        assert taken not in picked and sorted(picked) == sorted(free)
        with pytest.raises(RuntimeError, match="only 2 of 3"):
            ports.free_ports(3)


def test_the_ephemeral_range_falls_back_to_linuxs_default_on_an_unreadable_file(tmp_path):
    assert ports.ephemeral_range(tmp_path / "absent") == (32768, 60999)
    (tmp_path / "odd").write_text("70000 10")
    assert ports.ephemeral_range(tmp_path / "odd") == (32768, 60999)
    (tmp_path / "ok").write_text("40000\t50000\n")
    assert ports.ephemeral_range(tmp_path / "ok") == (40000, 50000)


def test_the_wider_stretch_outside_the_range_is_used():
    assert ports.candidate_ports((32768, 60999)) == range(ports.LOWEST, 32768)
    assert ports.candidate_ports((10500, 60999)) == range(61000, 65536)


def test_the_random_order_is_a_permutation_drawn_only_as_far_as_taken():
    rng = random.Random(1)
    assert sorted(ports._random_order(list(range(50)), rng)) == list(range(50))
    draws = []

    class Counting(random.Random):
        def randrange(self, *args):
            draws.append(args)
            return super().randrange(*args)

    first = next(ports._random_order(list(range(20_000)), Counting(2)))
    assert 0 <= first < 20_000 and len(draws) == 1  # one draw for one port, not 20,000 for a full shuffle


# ---------------------------------------------------------------- master_port auto: chosen where the round starts
# (moved here: ports.py is training/contract/ports.py now, run on the master host; the tests above are unchanged)


def _dry_run(accelbench, *args) -> str:
    """A dry run's plan with its run id (new for every run, dry or not) named."""
    result = accelbench("run", *args, "--dry-run")
    assert result.returncode == 0, result.stderr
    run_id = re.search(r"^run (\S+) \(dry run", result.stdout, re.MULTILINE).group(1)
    return result.stdout.replace(run_id, "RUN_ID")


def test_the_planner_binds_nothing_and_two_dry_runs_print_the_same_plan(accelbench, tmp_path, monkeypatch):
    """The master is an SSH host here: this machine's free ports say nothing of it. The plan binds no socket
    (any bind fails the test) and says who chooses the port; two dry runs print the same plan."""
    def refused(*args):
        raise AssertionError("the planner bound a socket")

    monkeypatch.setattr(socket.socket, "bind", refused)
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: n0, backend: ssh, address: 10.0.0.5}\n"
                                               "  - {name: n1, backend: ssh, address: 10.0.0.6}\n")
    first = _dry_run(accelbench, "gpt2_tiny:torch:cpu:2:1:2", "--cluster", cluster)
    assert first == _dry_run(accelbench, "gpt2_tiny:torch:cpu:2:1:2", "--cluster", cluster)
    assert first.count("master port: auto, chosen on host n0 (10.0.0.5) when the round starts") == 2  # per round
    assert "--master-addr=10.0.0.5 --master-port=@ACCELBENCH_MASTER_PORT@" in first
    fixed = write(tmp_path / "fixed.yaml", cluster.read_text() + "master_port: 29400\n")
    assert "master port: 29400 (master_port of the cluster file)" in _dry_run(
        accelbench, "gpt2_tiny:torch:cpu:2:1", "--cluster", fixed)
    one_node = _dry_run(accelbench, "gpt3_tiny:paddle:cpu:1:2")  # paddle's launcher alone on one node
    assert "master port: none (the launcher of one node needs no rendezvous port)" in one_node


def test_the_master_host_chooses_the_port_when_the_round_starts_and_the_round_records_it(tmp_path):
    """The host list's start on a real local host and process runtime: ports.py runs on the master host as an
    argv list (the SSH host runs the same list, each word quoted by hosts/ssh.py), the port it prints is filled
    into every node's launcher, and the round's record says which port and who chose it."""
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.backends.runtimes import RunRuntimes
    from run_benchmarks.backends.schedulers.hostlist import HostList
    from run_benchmarks.results.rounds.result import RoundResult

    plan = build(ROOT, tmp_path, "gpt2_tiny:torch:cpu:1:1")  # the checkout: its training/ holds ports.py
    case = plan.cases[0]
    rnd = case.rounds[0]
    echo = [sys.executable, "-c", "import sys; print(sys.argv[1:])", *rnd.nodes[0].argv[6:8]]  # its master flags
    rnd = dataclasses.replace(rnd, nodes=[dataclasses.replace(rnd.nodes[0], argv=echo, monitor_argv=None)])
    hosts = {"localhost": connect(rnd.nodes[0].host)}
    scheduler = HostList(plan, hosts, RunRuntimes(plan, hosts, ROOT))
    jobs = {}
    for _ in range(2):  # each start chooses again (a retried round too)
        rnd.nodes[0].log_dir.mkdir(parents=True, exist_ok=True)
        scheduler.start_round(case, rnd, RoundResult(str(case.name), 1, rnd.dir, "failed"), jobs, {})
        while jobs[0].poll() is None:
            time.sleep(0.02)
        said = rnd.nodes[0].launcher_log.read_text()
        port = int(re.findall(r"--master-port=(\d+)", said)[-1])  # this start's line (the log is appended to)
        low, high = ports.ephemeral_range()
        assert not low <= port <= high and port >= ports.LOWEST and ports.bindable(port)
        assert scheduler.rendezvous(rnd) == {
            "master_port": port, "chosen_by": "auto, chosen on host localhost (127.0.0.1) when the round starts"}
    assert "'--master-addr=127.0.0.1'" in said and "@ACCELBENCH" not in said


def test_ports_py_runs_as_a_file_publishes_waits_and_execs_with_the_port_filled_in(tmp_path):
    """What a Kubernetes pod runs before its launcher: index 0 publishes the port it chose, the others wait for
    the file; each execs its command with the port in place of the placeholder, every word one argument."""
    script = ROOT / PORT_SCRIPT
    printed = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and ports.read_port(printed.stdout) is not None  # no package needed
    record = tmp_path / "node0" / ports.PORT_FILE
    record.parent.mkdir()
    command = ["--", sys.executable, "-c", "import sys; print(sys.argv[1:])", "--port=@ACCELBENCH_MASTER_PORT@",
               "$(touch x); y"]
    waiting = subprocess.Popen([sys.executable, str(script), "--wait", str(record), "--timeout", "60", *command],
                               stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    published = subprocess.run([sys.executable, str(script), "--publish", str(record), *command],
                               capture_output=True, text=True, timeout=60, cwd=tmp_path)
    port = ports.read_port(record.read_text())
    assert published.returncode == 0 and published.stdout.strip() == str([f"--port={port}", "$(touch x); y"])
    assert waiting.communicate(timeout=60)[0].strip() == published.stdout.strip() and waiting.returncode == 0
    assert not (tmp_path / "x").exists()
    late = subprocess.run([sys.executable, str(script), "--wait", str(tmp_path / "none"), "--timeout", "0.2"],
                          capture_output=True, text=True, timeout=60)
    assert late.returncode == 1 and "no master port in" in late.stderr

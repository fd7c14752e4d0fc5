"""Multi-host runs over SSH against real sshd daemons on 127.0.0.2, 127.0.0.3, ... (Debian's openssh-server).

Each test host has its own host key; the client trusts exactly the keys the session's known_hosts file
holds, as against remote machines. The ok and crash paths are read from the session's SSH golden run
(tests/goldens.py: 2:2, the test kind 2:1 and a crash, under a work root whose name holds shell syntax);
the refusals run the CLI in-process; a deadline gets a real run of its own (handled signals over SSH are
in tests/test_signals.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .checks import assert_complete_ok, leftover_processes
from .conftest import write
from .goldens import HOSTILE_WORK, SHORT, SHORT_STEPS, SHORT_WARMUP


def assert_no_remote_leftovers(work_root: Path) -> None:
    """The remote workers' command lines name the hosts' work root (their config and log folders are under
    ``<work_root>/runs``), never the local log root; the sshd hosts run on this machine, so a worker left
    behind on a host is a process here whose command line names that root."""
    assert any((work_root / "runs").iterdir()), "the hosts ran nothing under the work root: the check would be empty"
    assert leftover_processes(work_root) == []


def golden_work_root(golden) -> Path:
    """The SSH golden's work root: a path whose parts hold shell syntax (and '/' from the marker's path)."""
    return golden.workdir / HOSTILE_WORK.format(marker=golden.workdir / "executed")


def test_two_ssh_hosts_run_a_case_with_results_like_a_local_run(golden_ssh):
    doc = golden_ssh.doc("gpt2_tiny:torch:cpu:2:2")
    assert_complete_ok(doc, world_size=4, steps=SHORT_STEPS, warmup=SHORT_WARMUP,
                       checkout=golden_ssh.workdir / "root")
    assert [n["host"] for n in doc["environment"]["nodes"]] == ["h0", "h1"]
    # master_port auto: chosen on the master host over SSH (ports.py under the hostile work root, one argv word)
    rendezvous = doc["environment"]["rendezvous"]
    assert rendezvous["chosen_by"].startswith("auto, chosen on host h0 (") and 10_000 <= rendezvous["master_port"]
    round_dir = golden_ssh.round_dir(doc)
    for node, ranks in (("h0_noderank0", range(2)), ("h1_noderank1", range(2, 4))):
        for rank in ranks:  # every rank's log came back over SFTP
            assert '"kind":"end"' in (round_dir / node / f"rank{rank}.stdout.log").read_text()
    assert_no_remote_leftovers(golden_work_root(golden_ssh))


def test_paths_with_shell_metacharacters_stay_data(golden_ssh):
    assert not (golden_ssh.workdir / "executed").exists()
    assert (golden_work_root(golden_ssh) / "code").is_dir()  # the odd name was used as a name


def test_a_crash_on_one_host_stops_both_and_keeps_their_logs(golden_ssh):
    assert golden_ssh.result.returncode == 1
    doc = golden_ssh.doc("gpt2_tiny:torch:cpu:2:1", **{"debug.fail_at_step": 3})
    assert doc["status"] == "failed"
    assert any("injected failure on rank 1 at step 3" in line for line in doc["error_lines"])
    assert '"step":2' in (golden_ssh.node_dir(doc, "h0_noderank0") / "rank0.stdout.log").read_text()
    assert_no_remote_leftovers(golden_work_root(golden_ssh))


def test_a_changed_host_key_is_refused_and_nothing_runs(accelbench, sshd, tmp_path):
    lines = sshd.known_hosts.read_text().splitlines()
    other_key = sshd.hosts[2].host_key_pub.read_text().split()[:2]
    forged = write(tmp_path / "known_hosts", "\n".join([lines[0].split()[0] + " " + " ".join(other_key), *lines[1:]]))
    path = write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=2, python=sys.executable,
                                                               work_root=str(tmp_path / "w")).replace(
        str(sshd.known_hosts), str(forged)))
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(path))
    assert result.returncode == 2
    assert "host h0 (127.0.0.2:" in result.stderr and "does not match the one in" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "w").exists()  # not even the healthy host got anything


def test_a_host_missing_from_known_hosts_is_refused(accelbench, sshd, tmp_path):
    partial = write(tmp_path / "known_hosts", sshd.known_hosts.read_text().splitlines()[0] + "\n")
    path = write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=2, python=sys.executable).replace(
        str(sshd.known_hosts), str(partial)))
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(path))
    assert result.returncode == 2
    assert f"host h1 (127.0.0.3:{sshd.hosts[1].port}): not in {partial}" in result.stderr
    assert "ssh-keyscan" in result.stderr


def test_an_unreachable_host_fails_preflight_quickly(accelbench, sshd, tmp_path):
    text = sshd.cluster_yaml(count=2, python=sys.executable, connect_timeout_s=3).replace("127.0.0.3", "127.0.0.99")
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(write(tmp_path / "c.yaml", text)))
    assert result.returncode == 2
    assert "host h1 (127.0.0.99:" in result.stderr and "unreachable" in result.stderr


def test_a_hang_past_the_deadline_stops_every_remote_process(cli, sshd, tmp_path):
    """The hang starts at the first step, so the deadline (which counts once every node has started) is all
    the test waits for."""
    work_root = tmp_path / "hosts-work"
    cluster = write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=2, python=sys.executable,
                                                                  work_root=str(work_root)))
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--set", "debug.hang_at_step=0", "--timeout", "8",
                 "--cluster", str(cluster))
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 8 s passed" in doc["reason"]
    assert_no_remote_leftovers(work_root)  # the tagged remote tree was killed


def test_a_test_hosts_command_runs_without_the_accounts_shell_start_up(sshd, tmp_path):
    """The test hosts share this machine's account: its ``~/.bashrc`` (here pyenv's init, 0.15 s of CPU a
    command) must not run before every SSH command of the suite (tests/infra/sshd.py: each session's HOME is an
    empty folder). The command's process is the shell that sshd started (``exec``): what that shell ran before it
    is in its children's CPU."""
    from run_benchmarks.backends.hosts.ssh import open_client
    from run_benchmarks.catalog.config import load_model
    from run_benchmarks.catalog.config_files import ClusterSpec

    spec = load_model(ClusterSpec, write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=1))).hosts[0]
    client = open_client(spec)
    try:
        _, stdout, _ = client.exec_command("exec cat /proc/self/stat")
        stat = stdout.read().decode()
    finally:
        client.close()
    children_ticks = stat[stat.rindex(")") + 2:].split()[13:15]  # cutime, cstime: the waited-for children's
    assert children_ticks == ["0", "0"], stat

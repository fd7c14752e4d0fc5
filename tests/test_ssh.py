"""Multi-host runs over SSH against real sshd daemons on 127.0.0.2, 127.0.0.3, ... (Debian's openssh-server).

Each test host has its own host key; the client trusts exactly the keys the
fixture writes to known_hosts, as against remote machines.
"""
from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

import pytest

from tests.infra.sshd import SSHD, start_sshd_cluster

from .conftest import write
from .signal_faults import LONG, start, wait_for_step
from .checks import assert_complete_ok, leftover_processes
from .goldens import SHORT, SHORT_STEPS, SHORT_WARMUP

pytestmark = pytest.mark.skipif(not Path(SSHD).exists(), reason="no sshd (./dev test installs openssh-server)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    cluster = start_sshd_cluster(tmp_path_factory.mktemp("sshd"), count=3, port=_free_port())
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_file(sshd, tmp_path):
    def make(text: str | None = None, **extra) -> Path:
        settings = {"python": sys.executable, "work_root": str(tmp_path / "hosts-work"), **extra}
        body = text or sshd.cluster_yaml(**settings)
        return write(tmp_path / "cluster.yaml", body)
    return make


def assert_no_remote_leftovers(work_root: Path) -> None:
    """The remote workers' command lines name the hosts' work root (their config and log folders are under
    ``<work_root>/runs``), never the local log root; the sshd hosts run on this machine, so a worker left
    behind on a host is a process here whose command line names that root."""
    assert any((work_root / "runs").iterdir()), "the hosts ran nothing under the work root: the check would be empty"
    assert leftover_processes(work_root) == []


@pytest.mark.parametrize("nprocs", [1, 2])
def test_two_ssh_hosts_run_a_case_with_results_like_a_local_run(cli, cluster_file, nprocs, tmp_path):
    result = cli("run", f"gpt2_tiny:torch:cpu:2:{nprocs}", *SHORT, "--cluster", str(cluster_file()))
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert_complete_ok(doc, world_size=2 * nprocs, steps=SHORT_STEPS, warmup=SHORT_WARMUP)
    assert [n["host"] for n in doc["environment"]["nodes"]] == ["h0", "h1"]
    round_dir = result.run_dirs()[0] / f"gpt2_tiny-torch-cpu-2x{nprocs}" / "round1"
    for node, ranks in (("h0_noderank0", range(nprocs)), ("h1_noderank1", range(nprocs, 2 * nprocs))):
        for rank in ranks:  # every rank's log came back over SFTP
            assert '"kind":"end"' in (round_dir / node / f"rank{rank}.stdout.log").read_text()
    assert_no_remote_leftovers(tmp_path / "hosts-work")


def test_a_changed_host_key_is_refused_and_nothing_runs(cli, sshd, cluster_file, tmp_path):
    lines = sshd.known_hosts.read_text().splitlines()
    other_key = sshd.hosts[2].host_key_pub.read_text().split()[:2]
    forged = write(tmp_path / "known_hosts", "\n".join([lines[0].split()[0] + " " + " ".join(other_key), *lines[1:]]))
    path = cluster_file(sshd.cluster_yaml(python=sys.executable, work_root=str(tmp_path / "w")).replace(
        str(sshd.known_hosts), str(forged)))
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(path))
    assert result.returncode == 2
    assert "host h0 (127.0.0.2:" in result.stderr and "does not match the one in" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "w").exists()  # not even the healthy host got anything


def test_a_host_missing_from_known_hosts_is_refused(cli, sshd, cluster_file, tmp_path):
    partial = write(tmp_path / "known_hosts", sshd.known_hosts.read_text().splitlines()[0] + "\n")
    path = cluster_file(sshd.cluster_yaml(python=sys.executable).replace(str(sshd.known_hosts), str(partial)))
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(path))
    assert result.returncode == 2
    assert f"host h1 (127.0.0.3:{sshd.hosts[1].port}): not in {partial}" in result.stderr
    assert "ssh-keyscan" in result.stderr


def test_an_unreachable_host_fails_preflight_quickly(cli, sshd, cluster_file):
    text = sshd.cluster_yaml(python=sys.executable, connect_timeout_s=3).replace("127.0.0.3", "127.0.0.99")
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster", str(cluster_file(text)), timeout=60)
    assert result.returncode == 2
    assert "host h1 (127.0.0.99:" in result.stderr and "unreachable" in result.stderr


def test_paths_with_shell_metacharacters_stay_data(cli, cluster_file, tmp_path):
    marker = tmp_path / "executed"
    hostile = tmp_path / f"work $(touch {marker}); `touch {marker}` & echo"
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--cluster",
                 str(cluster_file(work_root=f"'{hostile}'")))
    assert result.returncode == 0, result.stderr + result.stdout
    assert not marker.exists()
    assert (hostile / "code").is_dir()  # the odd name was used as a name


def test_a_crash_on_one_host_stops_both_and_keeps_their_logs(cli, cluster_file, tmp_path):
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--set", "debug.fail_at_step=3",
                 "--set", "debug.fail_rank=1", "--cluster", str(cluster_file()))
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "failed"
    assert any("injected failure on rank 1 at step 3" in line for line in doc["error_lines"])
    node_dir = result.run_dirs()[0] / "gpt2_tiny-torch-cpu-2x1" / "round1" / "h0_noderank0"
    assert '"step":2' in (node_dir / "rank0.stdout.log").read_text()
    assert_no_remote_leftovers(tmp_path / "hosts-work")


def test_a_hang_past_the_deadline_stops_every_remote_process(cli, cluster_file, tmp_path):
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", *SHORT, "--set", "debug.hang_at_step=3", "--timeout", "30",
                 "--cluster", str(cluster_file()))
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout"
    assert_no_remote_leftovers(tmp_path / "hosts-work")  # the tagged remote tree was killed


def test_ctrl_c_stops_every_remote_process_and_records_interrupted(cluster_file, tmp_path):
    work_root = tmp_path / "hosts-work"
    orch = start(tmp_path, "gpt2_tiny:torch:cpu:2:1", "--cluster", str(cluster_file()), *LONG)
    wait_for_step(orch, [work_root / "runs"])
    orch.process.send_signal(signal.SIGINT)
    assert orch.wait(120) == 130, orch.stderr()[-3000:]
    (doc_path,) = orch.log_root.glob("*/*/round1/results.json")
    doc = json.loads(doc_path.read_text())
    assert doc["status"] == "interrupted" and doc["steps_completed"] >= 1 and "Traceback" not in orch.stderr()
    for node, rank in (("h0_noderank0", 0), ("h1_noderank1", 1)):  # logs made before the stop came back (SFTP)
        assert '"kind":"step"' in (doc_path.parent / node / f"rank{rank}.stdout.log").read_text()
    assert_no_remote_leftovers(work_root)

"""Accelerator kinds end to end: the test kind (declared only in tests/vendors/testkind) run locally, over SSH
and in containers, with every seam asserted; Paddle inside containers; AMD preflight against stand-in
``amd-smi`` / ``rocm-smi`` tools on the PATH of a real SSH host."""
from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

from tests.infra.sshd import SSHD, start_sshd_cluster

from .conftest import ROOT, write
from .goldens import SHORT

pytestmark = pytest.mark.skipif(not Path(SSHD).exists(), reason="no sshd (./dev test installs openssh-server)")

TESTKIND = ROOT / "tests" / "vendors" / "testkind"
GIB = 2**30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return s.getsockname()[1]


@pytest.fixture
def kind_root(root):
    """A checkout copy with the test kind's vendor folder added, as a vendor would add theirs."""
    shutil.copytree(TESTKIND, root / "vendors" / "testkind")
    (root / "training").symlink_to(ROOT / "training")
    return root


def assert_every_seam_used(doc: dict, visible: str, nodes: int) -> None:
    """The kind's variable reached the ranks, its count came from its command, its monitor rows from its
    tool, its worker hooks ran, and reports use its declared memory and peak."""
    assert doc["status"] == "ok", doc["reason"] + "\n" + "\n".join(doc["error_lines"])
    assert len(doc["environment"]["nodes"]) == nodes
    for node in doc["environment"]["nodes"]:
        assert node["devices"]["count"] == 3 and node["devices"]["command"].endswith("testkind/smi.py list")
        env = node["environment"]
        assert env["accelerator_kind"] == "testkind"
        assert env["visible_devices"] == {"TESTKIND_VISIBLE_DEVICES": visible}
        assert env["testkind_plugin"] == {"setup_kind": "testkind", "visible_at_setup": visible}
        assert node["probes"]["testkind_devices"] == "three test devices"
    assert len(doc["monitor"]["nodes"]) == nodes
    for node in doc["monitor"]["nodes"]:
        assert node["status"]["accelerator"] == "ok (command: python3)"
        assert [d["name"] for d in node["devices"]] == ["tk-0", "tk-1", "tk-2"]
        assert node["devices"][1]["mem_used_bytes"]["max"] == 2048 * 2**20
        assert node["devices"][0]["power_w"]["mean"] == pytest.approx(70.5)
    metrics = doc["metrics"]
    assert metrics["memory_total_bytes"] == 16 * GIB and metrics["memory_total_source"] == "declared"
    assert metrics["peak_tflops"] == 2.0 and metrics["mfu"] == pytest.approx(metrics["tflops_per_device"] / 2.0)


LOCAL_KIND_CASES = ["gpt2_tiny:torch:TK1:1:2", "gpt3_tiny:paddle:TK1:1:2"]


@pytest.fixture(scope="module")
def local_kind_run(tmp_path_factory):
    """Both frameworks of the test kind on this machine (devices [1, 2]), SHORT, in one invocation (a
    vendor's list of cases: one orchestrator and store for the two, as each had its own before)."""
    from .goldens import SHORT_SET, kind_root as checkout_with_kind, test_conf
    from .runner import run_cli

    workdir = tmp_path_factory.mktemp("kind-local")
    root = checkout_with_kind(workdir / "root")
    cluster = write(workdir / "cluster.yaml", "hosts:\n  - {name: localhost, devices: [1, 2]}\n")
    conf = test_conf(workdir / "test_conf.yaml", [{"case": case, "set": SHORT_SET} for case in LOCAL_KIND_CASES])
    return run_cli(workdir, "run", "--test-conf", str(conf), "--root", str(root), "--cluster", str(cluster),
                   timeout=600)


@pytest.mark.e2e  # its run is local_kind_run's (a real launch per case): lane "local", not the inner loop
@pytest.mark.parametrize("case", LOCAL_KIND_CASES)
def test_the_test_kind_runs_locally_through_every_seam(local_kind_run, accelbench, case):
    result = local_kind_run
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = [d for d in result.results() if d["case_name"] == case]
    assert_every_seam_used(doc, "1,2", nodes=1)
    assert "MFU n/a" not in result.stdout and result.stdout.count("/ 16.0 GiB") >= len(LOCAL_KIND_CASES)
    # Reports show the device memory in use the kind's monitor read (its largest device: 3072 MiB), against
    # the declared total, and say which memory that is.
    assert doc["monitor"]["device_memory_used_bytes"] == 3072 * 2**20
    report = accelbench("report", "last", "--db", str(result.log_root / "results.db"), "--format", "markdown")
    assert report.returncode == 0, report.stderr
    assert report.stdout.count("3.0 GiB / 16.0 GiB (device in use)") >= len(LOCAL_KIND_CASES)


def test_more_processes_than_the_kind_counts_is_refused_before_anything_runs(accelbench, kind_root, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: localhost, devices: [0, 1, 2, 3]}\n")
    result = accelbench("run", "gpt2_tiny:torch:TK1:1:4", *SHORT, "--root", str(kind_root), "--cluster", str(cluster))
    assert result.returncode == 2, result.stderr
    assert "host localhost: 4 process(es) per node need as many testkind devices" in result.stderr
    assert "smi.py list` lists 3" in result.stderr and "Traceback" not in result.stderr
    assert result.run_dirs() == []


def test_each_kind_counts_its_devices_whatever_ran_before_it_on_the_host(accelbench, kind_root, tmp_path):
    """A cpu case with more processes listed first must not hide the device case's count: 4 ranks of the
    test kind need 4 devices and its tool lists 3 (devices were counted per host, for the case with the most
    processes, which skipped the test kind here)."""
    from .goldens import test_conf

    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: localhost, devices: [0, 1, 2, 3]}\n")
    conf = test_conf(tmp_path / "test_conf.yaml", [{"case": "gpt2_tiny:torch:cpu:1:5"},
                                                   {"case": "gpt2_tiny:torch:TK1:1:4"}])
    result = accelbench("run", "--test-conf", str(conf), "--root", str(kind_root), "--cluster", str(cluster))
    assert result.returncode == 2, result.stderr + result.stdout
    assert "host localhost: 4 process(es) per node need as many testkind devices" in result.stderr
    assert result.run_dirs() == []


def test_the_test_kind_runs_over_ssh_through_every_seam(golden_ssh):
    doc = golden_ssh.doc("gpt2_tiny:torch:TK1:2:1")  # hosts with devices [0, 1]: one rank each, device 0
    assert_every_seam_used(doc, "0", nodes=2)


def test_the_test_kind_runs_in_containers_through_every_seam(golden_containers):
    doc = golden_containers.doc("gpt2_tiny:torch_2.13:TK1:1:1")  # h0, devices [2]: a node's seams in its image
    assert_every_seam_used(doc, "2", nodes=1)
    assert all(n["image"].startswith("accelbench/testkind-torch_2.13:") for n in doc["environment"]["nodes"])


# ---------------------------------------------------------------- AMD preflight


@pytest.fixture(scope="module")
def amd_host(tmp_path_factory):
    """One SSH host whose PATH starts with a folder of stand-in AMD tools (filled per test)."""
    tools = tmp_path_factory.mktemp("amd-tools")
    cluster = start_sshd_cluster(tmp_path_factory.mktemp("sshd-amd"), count=1, port=_free_port(), first_octet=20,
                                 env={"PATH": f"{tools}:/usr/local/bin:/usr/bin:/bin"})
    yield cluster, tools
    cluster.stop()


def _stand_in(tools: Path, name: str, output: str) -> None:
    for old in tools.iterdir():
        old.unlink()
    if name:
        tool = write(tools / name, "#!/bin/sh\ncat <<'EOF'\n" + output + "EOF\n")
        tool.chmod(0o755)


AMD_SMI = "GPU: 0\n    BDF: 0000:0c:00.0\n\nGPU: 1\n    BDF: 0000:22:00.0\n"
ROCM_SMI = ("=== ROCm System Management Interface ===\nGPU[0]\t\t: Device Name: \t\tMI300X\nGPU[0]\t\t: Device ID: "
            "\t\t0x74a1\nGPU[1]\t\t: Device Name: \t\tMI300X\nGPU[1]\t\t: Device ID: \t\t0x74a1\n")


@pytest.mark.parametrize("tool, output, counted", [
    ("amd-smi", AMD_SMI, "`amd-smi list` lists 2"),
    ("rocm-smi", ROCM_SMI, "`rocm-smi --showid` lists 2"),  # no amd-smi: the older tool answers
    ("", "", "no device-count command of accelerator kind 'rocm' ran: amd-smi list"),
])
def test_amd_hosts_count_their_gpus_with_amd_smi_or_rocm_smi(accelbench, amd_host, tmp_path, tool, output, counted):
    cluster, tools = amd_host
    _stand_in(tools, tool, output)
    path = write(tmp_path / "cluster.yaml", cluster.cluster_yaml(python=sys.executable,
                                                                 work_root=str(tmp_path / "work")))
    result = accelbench("run", "gpt2_tiny:torch:MI300X:1:4", *SHORT, "--cluster", str(path))
    assert result.returncode == 2, result.stderr + result.stdout
    assert counted in result.stderr and "Traceback" not in result.stderr
    assert "nvidia-smi" not in result.stderr
    assert result.run_dirs() == []

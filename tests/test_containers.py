"""Nodes in the vendor's container, on real SSH hosts and a real Docker engine (no registry: the base
image is a debootstrapped Debian imported with ``docker import``; wheels come from this machine)."""
from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.infra.sshd import start_sshd_cluster

from .conftest import ROOT, write
from .checks import assert_complete_ok
from .goldens import SHORT, SHORT_STEPS, SHORT_WARMUP


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    cluster = start_sshd_cluster(tmp_path_factory.mktemp("sshd"), count=2, port=port)
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_file(hosts, engine, tmp_path):
    def make(**extra):
        settings = {"work_root": str(tmp_path / "hosts-work"), "runtime": "container",
                    "docker_host": engine.docker_host, **extra}
        return write(tmp_path / "cluster.yaml", hosts.cluster_yaml(**settings))
    return make


@pytest.fixture
def accelbench_containers(engine, tmp_path):
    """This test's containers still on the engine: node containers whose log folder is under this test's
    tmp_path, and probe containers made since the test began. Leftovers of other runs do not count."""
    import docker

    from run_benchmarks.containers import LABEL_LOG

    client = docker.DockerClient(base_url=engine.docker_host)
    before = {c.id for c in client.containers.list(all=True, filters={"label": "accelbench"})}

    def mine() -> list[str]:
        found = []
        for c in client.containers.list(all=True, filters={"label": "accelbench"}):
            log_dir = c.labels.get(LABEL_LOG)
            if (log_dir and log_dir.startswith(str(tmp_path))) or (log_dir is None and c.id not in before):
                found.append(c.name)
        return found

    yield mine
    client.close()


@pytest.fixture(scope="module")
def cpu_torch_image(engine) -> str:
    """The cpu vendor's torch_2.13 image by the exact tag the runtime computes (built here when missing), so a
    test that needs it does not depend on the tests before it, nor take a stale image with a similar name."""
    import docker

    from run_benchmarks import images
    from run_benchmarks.vendors import VendorRegistry

    vendor = VendorRegistry(ROOT / "vendors").vendors["cpu"]
    runtime = vendor.frameworks["torch"]
    spec = images.image_for("cpu", ROOT / "vendors" / "cpu", "torch", "2.13", runtime.image,
                            runtime.container.build_args)
    client = docker.DockerClient(base_url=engine.docker_host, timeout=900)
    try:
        images.ensure_image(client, spec, "test engine")
    finally:
        client.close()
    return spec.tag


@pytest.mark.parametrize("nprocs", [1, 2])
def test_two_ssh_hosts_run_each_node_in_the_vendor_image(cli, cluster_file, engine, nprocs, accelbench_containers):
    result = cli("run", f"gpt2_tiny:torch_2.13:cpu:2:{nprocs}", *SHORT, "--cluster", str(cluster_file()),
                 timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert_complete_ok(doc, world_size=2 * nprocs, steps=SHORT_STEPS, warmup=SHORT_WARMUP, in_image=True)
    node_env = doc["environment"]["nodes"][0]["environment"]
    assert "bookworm" in node_env["os"]  # measured inside the image, not on this machine
    for node in doc["environment"]["nodes"]:  # which image, exactly, and the host facts probed over SSH
        assert node["image"].startswith("accelbench/cpu-torch_2.13:") and node["image_id"].startswith("sha256:")
        assert node["probes"]["host_kernel"] == platform.release()
    for node in doc["monitor"]["nodes"]:  # each node's monitor ran in a sibling container from the image
        assert node["status"]["host"] == "ok (host)" and node["host"]["cpu_percent"]["max"] > 0
    assert accelbench_containers() == []  # removed by name after the round


def test_an_interpreter_missing_from_the_image_fails_preflight(cli, cluster_file, engine, accelbench_containers):
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:2:1", *SHORT, "--cluster",
                 str(cluster_file(python="/no/such/python")), timeout=900)
    assert result.returncode == 2
    assert "host h0: /no/such/python does not run in image accelbench/cpu-torch_2.13:" in result.stderr
    assert "Traceback" not in result.stderr
    assert accelbench_containers() == []


def test_a_container_that_cannot_start_fails_the_case_and_is_removed(cli, cluster_file, engine, root,
                                                                     accelbench_containers):
    (root / "training").symlink_to(ROOT / "training")  # the workload code that goes to the hosts
    vendor = root / "vendors/cpu/vendor.yaml"
    vendor.write_text(vendor.read_text().replace(
        "    env: {}", "    env: {}\n    container:\n      devices: [/dev/accelbench-no-such-device]"))
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:2:1", *SHORT, "--root", str(root), "--cluster",
                 str(cluster_file()), timeout=900)
    assert result.returncode == 1, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "failed" and doc["reason"].startswith("a node could not start: ")
    assert accelbench_containers() == []


def test_a_crash_in_a_container_stops_every_node(cli, cluster_file, engine, accelbench_containers):
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:2:1", *SHORT, "--set", "debug.fail_at_step=3",
                 "--set", "debug.fail_rank=0", "--cluster", str(cluster_file()), timeout=900)
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "failed"
    assert any("injected failure on rank 0 at step 3" in line for line in doc["error_lines"])
    assert accelbench_containers() == []


def test_python_runs_as_the_image_has_it(engine, cpu_torch_image):
    """The image really is the vendor's: its torch is the pinned CPU build."""
    import docker

    from run_benchmarks import containers

    client = docker.DockerClient(base_url=engine.docker_host)
    assert containers.distribution_version(client, cpu_torch_image, "python", ["torch"]).startswith("2.13.0")
    client.close()


def test_a_hang_past_the_deadline_is_a_timeout_and_every_container_goes(cli, cluster_file, engine,
                                                                        accelbench_containers):
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:2:1", *SHORT, "--set", "debug.hang_at_step=3",
                 "--timeout", "40", "--cluster", str(cluster_file()), timeout=900)
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout"
    node_dir = result.run_dirs()[0] / "gpt2_tiny-torch_2.13-cpu-2x1" / "round1" / "h1_noderank1"
    assert '"step":2' in (node_dir / "rank1.stdout.log").read_text()  # logs made before the stop came back
    assert accelbench_containers() == []


def test_ctrl_c_stops_every_container_and_records_interrupted(cluster_file, engine, tmp_path, accelbench_containers):
    log_root = tmp_path / "logs"
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", "gpt2_tiny:torch_2.13:cpu:2:1", "--log-root",
            str(log_root), "--cluster", str(cluster_file()), "--set", "train.steps=100000",
            "--set", "train.warmup_steps=1"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # the first run may build the image
    while time.monotonic() < deadline:  # wait until the remote node trains (its log is on the host)
        logs = list((tmp_path / "hosts-work").glob("runs/*/*/round1/h0_noderank0/torchrun/*/attempt_0/0/stdout.log"))
        if logs and '"kind":"step"' in logs[0].read_text():
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("training never started")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    (doc_path,) = log_root.glob("*/*/round1/results.json")
    doc = json.loads(doc_path.read_text())
    assert doc["status"] == "interrupted" and doc["steps_completed"] >= 1
    assert "Traceback" not in stderr
    assert accelbench_containers() == []

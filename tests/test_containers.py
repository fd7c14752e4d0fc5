"""Nodes in the vendor's container, on real SSH hosts and a real Docker engine (no registry: the base
image is a debootstrapped Debian imported with ``docker import``; wheels come from this machine).

The ok and crash paths are read from the session's container golden run (tests/goldens.py: torch 2:2, the
test kind's image 1:1, Paddle's image 1:1 and a crash 2:1, in one invocation); a container that cannot start,
an interpreter missing from the image and a deadline get runs of their own, each on one node (what they show is
a node's container: the multi-node stop is the golden's crash here, and the deadline over SSH is
tests/test_ssh.py's on two hosts); signals are in tests/test_signals.py.
"""
from __future__ import annotations

import platform

from .conftest import ROOT, write
from .checks import assert_complete_ok
from .goldens import SHORT, SHORT_STEPS, SHORT_WARMUP


def test_two_ssh_hosts_run_each_node_in_the_vendor_image(golden_containers, accelbench_containers):
    doc = golden_containers.doc("gpt2_tiny:torch_2.13:cpu:2:2")
    assert_complete_ok(doc, world_size=4, steps=SHORT_STEPS, warmup=SHORT_WARMUP, in_image=True,
                       checkout=golden_containers.workdir / "root")
    node_env = doc["environment"]["nodes"][0]["environment"]
    assert "bookworm" in node_env["os"]  # measured inside the image, not on this machine
    for node in doc["environment"]["nodes"]:  # which image, exactly, and the host facts probed over SSH
        assert node["image"].startswith("accelbench/cpu-torch_2.13:") and node["image_id"].startswith("sha256:")
        assert node["probes"]["host_kernel"] == platform.release()
    for node in doc["monitor"]["nodes"]:  # each node's monitor ran in a sibling container from the image
        assert node["status"]["host"] == "ok (host)" and node["host"]["cpu_percent"]["max"] > 0
    assert accelbench_containers(golden_containers.workdir) == []  # removed by name after each round


def test_a_crash_in_a_container_stops_every_node(golden_containers):
    """Rank 0 (h0) crashes at its first step; h1's rank waits in its first all-reduce until its container is
    stopped: the run ends (no deadline is set) and no container is left (the first test above)."""
    assert golden_containers.result.returncode == 1
    doc = golden_containers.doc("gpt2_tiny:torch_2.13:cpu:2:1", **{"debug.fail_at_step": 0})
    assert doc["status"] == "failed"
    assert any("injected failure on rank 0 at step 0" in line for line in doc["error_lines"])


def test_paddle_runs_in_the_vendor_paddle_image(golden_containers):
    """The cpu vendor's Paddle image has no torch: the Paddle worker must not need it (one node: two Paddle
    launchers meeting through the master are tests/test_paddle.py's)."""
    doc = golden_containers.doc("gpt3_tiny:paddle_3.3:cpu:1:1")
    assert doc["status"] == "ok", doc["reason"]
    assert doc["metrics"]["world_size"] == 1 and doc["metrics"]["measured_steps"] == SHORT_STEPS - SHORT_WARMUP
    for node in doc["environment"]["nodes"]:
        assert node["image"].startswith("accelbench/cpu-paddle_3.3:")
        assert node["environment"]["paddle"].startswith("3.3") and "torch" not in node["environment"]


def cluster_file(sshd, engine, tmp_path, **extra):
    """One SSH host (h0) whose nodes run in containers."""
    settings = {"work_root": str(tmp_path / "hosts-work"), "runtime": "container",
                "docker_host": engine.docker_host, **extra}
    return write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=1, **settings))


def test_an_interpreter_missing_from_the_image_fails_preflight(accelbench, sshd, engine, cpu_torch_image, tmp_path,
                                                               accelbench_containers):
    result = accelbench("run", "gpt2_tiny:torch_2.13:cpu:1:1", *SHORT, "--cluster",
                        str(cluster_file(sshd, engine, tmp_path, python="/no/such/python")))
    assert result.returncode == 2
    assert "host h0: /no/such/python does not run in image accelbench/cpu-torch_2.13:" in result.stderr
    assert "Traceback" not in result.stderr
    assert accelbench_containers() == []


def test_a_container_that_cannot_start_fails_the_case_and_is_removed(cli, sshd, engine, cpu_torch_image, root,
                                                                     tmp_path, accelbench_containers):
    (root / "training").symlink_to(ROOT / "training")  # the workload code that goes to the hosts
    vendor = root / "vendors/cpu/vendor.yaml"
    vendor.write_text(vendor.read_text().replace(
        "    env: {}", "    env: {}\n    container:\n      devices: [/dev/accelbench-no-such-device]"))
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:1:1", *SHORT, "--root", str(root), "--cluster",
                 str(cluster_file(sshd, engine, tmp_path)), timeout=900)
    assert result.returncode == 1, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "failed" and doc["reason"].startswith("a node could not start: ")
    assert accelbench_containers() == []


def test_python_runs_as_the_image_has_it(engine, cpu_torch_image):
    """The image really is the vendor's: its torch is the pinned CPU build."""
    import docker

    from run_benchmarks.backends.runtimes import docker as containers

    client = docker.DockerClient(base_url=engine.docker_host)
    assert containers.distribution_version(client, cpu_torch_image, "python", ["torch"]).startswith("2.13.0")
    client.close()


def test_a_hang_past_the_deadline_is_a_timeout_and_every_container_goes(cli, sshd, engine, cpu_torch_image,
                                                                        tmp_path, accelbench_containers):
    """The hang starts at the first step and the deadline counts once every node has started: the test
    waits for little more than the deadline. One node: its container and its monitor's must go (two hosts' remote
    trees stopped at a deadline: tests/test_ssh.py)."""
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:1:1", *SHORT, "--set", "debug.hang_at_step=0",
                 "--timeout", "8", "--cluster", str(cluster_file(sshd, engine, tmp_path)), timeout=900)
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 8 s passed" in doc["reason"]
    assert accelbench_containers() == []


def test_a_bridged_engine_connection_that_ends_leaves_the_others_answering(sshd, engine, tmp_path):
    """Engines on SSH hosts are reached through a local socket whose connections are SSH channels to
    ``docker system dial-stdio``. A connection ending (a log stream, at a round's end) must shut only its own
    socket: the bridge once shut the newest connection instead, whose request then got no answer ("Remote end
    closed connection without response"), failing the next case's nodes."""
    import socket
    import time

    from run_benchmarks.catalog.config import load_model
    from run_benchmarks.catalog.config_files import ClusterSpec
    from run_benchmarks.backends.runtimes.docker import SshDockerBridge
    from run_benchmarks.backends.hosts.ssh import open_client

    spec = load_model(ClusterSpec, write(tmp_path / "cluster.yaml", sshd.cluster_yaml(count=1))).hosts[0]
    client = open_client(spec)
    bridge = SshDockerBridge(client, engine.docker_host)
    try:
        stream = socket.socket(socket.AF_UNIX)
        stream.connect(bridge.path)
        stream.sendall(b"GET /v1.41/events HTTP/1.1\r\nHost: docker\r\n\r\n")  # streams until closed
        assert stream.recv(64).startswith(b"HTTP/1.1 200")
        request = socket.socket(socket.AF_UNIX)
        request.connect(bridge.path)
        request.sendall(b"GET /v1.41/version HTTP/1.1\r\n")  # half a request: the engine waits for the rest
        stream.close()  # ... while the other connection ends
        time.sleep(1.0)  # its bridge threads have finished
        request.sendall(b"Host: docker\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := request.recv(65536):
            answer += chunk
        request.close()
        assert answer.startswith(b"HTTP/1.1 200") and b"ApiVersion" in answer, answer[:200]
    finally:
        bridge.close()
        client.close()

"""The Kubernetes scheduler with real pods: the API stand-in (tests/infra/k8s_api.py) and its kubelet
(tests/infra/k8s_kubelet.py), which runs each pod of the rendered Indexed Job as processes in a network
namespace of its own node (two namespaces joined by one veth pair, nothing else), resolving the pods'
names ``<job>-<i>.<service>`` through each pod's own /etc/hosts. So a 2-pod job does a real torchrun
rendezvous across namespaces and trains gpt2_tiny, then Ctrl-C and a killed orchestrator must leave no pod
process. What is real: the rendered command, args, ``JOB_COMPLETION_INDEX``, ConfigMap and shared folder;
what is not: the image (no container runtime: the pods run on this machine's file system and Python).
Needs root (``ip netns``, ``unshare``, ``mount``); the orchestrator runs in a subprocess, as a user runs it.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from training.contract import perflog

from . import signal_faults
from .conftest import write
from .goldens import SHORT
from .infra.k8s_api import Cluster, StandIn
from .infra.k8s_kubelet import Kubelet, NetnsUnavailable, PodNodes

pytestmark = pytest.mark.e2e

CASE = "gpt2_tiny:torch:cpu:2:1"


@pytest.fixture(scope="module")
def nodes():
    """The two nodes, made once for the module and removed after it (with anything left in them)."""
    try:
        made = PodNodes(f"ab{os.getpid()}").create()
    except (NetnsUnavailable, FileNotFoundError) as exc:
        pytest.skip(f"needs network namespaces (root, iproute2): {exc}")  # a failure under CI
    yield made
    made.remove()


@pytest.fixture
def api(nodes, tmp_path):
    """A stand-in whose pods run on ``nodes``; ``api.cluster_file`` points a run at it."""
    kubelet = Kubelet(nodes, tmp_path / "kubelet")
    server = StandIn(Cluster(lambda index: [], kubelet=kubelet), tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    settings = {"namespace": "bench", "kubeconfig": str(server.kubeconfig), "image": "reg.example/torch:2.13",
                "shared_dir": str(shared), "shared_claim": "bench-rwx", "python": sys.executable, "poll_s": 0.2,
                "pending_timeout_s": 60}
    lines = ["scheduler: kubernetes", "kubernetes:", *(f"  {k}: {json.dumps(v)}" for k, v in settings.items())]
    server.cluster_file = write(tmp_path / "k8s.yaml", "\n".join(lines) + "\n")
    server.shared = shared
    yield server
    kubelet.close()
    server.close()
    assert server.cluster.errors == []


def test_two_pods_rendezvous_across_namespaces_and_train(api, nodes, cli):
    result = cli("run", CASE, *SHORT, "--timeout", "120", "--cluster", str(api.cluster_file), timeout=180)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["metrics"]["tokens_per_s_total"] > 0, doc["reason"]
    assert [n["kubernetes"]["node"] for n in doc["environment"]["nodes"]] == nodes.names
    (name, policy), = api.cluster.deletes
    assert policy == "Foreground" and api.cluster.pods == {} and api.cluster.owned == {}
    round_dir = Path(doc["results_path"]).parent
    for rank in (0, 1):  # each node's one rank, world size 2: the rendezvous went over the veth pair
        log = (round_dir / f"kubernetes_noderank{rank}" / f"rank{rank}.stdout.log").read_text()
        (start,) = [r for r in map(perflog.parse_line, log.splitlines()) if isinstance(r, perflog.StartRecord)]
        assert (start.world_size, start.node_rank, start.rank) == (2, rank, rank)
    (hosts,) = [(path.parent / "etc-upper" / "hosts").read_text() for (pod, container), path in
                api.cluster.log_files.items() if container == "launcher" and pod.startswith(f"{name}-1-")]
    assert f"{nodes.addresses[0]} {name}-0.{name}.bench.svc.cluster.local {name}-0.{name}\n" in hosts
    assert f"{nodes.addresses[1]} {name}-1.{name}.bench.svc.cluster.local {name}-1.{name} {name}-1\n" in hosts
    assert nodes.pids() == []


def _training(api, tmp_path) -> signal_faults.Orchestrator:
    """A long run in a subprocess, returned once both pods' torchrun started their worker (torchrun opens
    a worker's log after its own signal handlers are set: a SIGTERM then reaches it, as in a pod)."""
    orch = signal_faults.start(tmp_path, CASE, *signal_faults.LONG, "--timeout", "300", "--cluster",
                               str(api.cluster_file))
    deadline = time.monotonic() + 90
    while len(list((api.shared / "runs").glob("**/attempt_0/*/stdout.log"))) < 2:
        assert orch.process.poll() is None, orch.stderr()[-3000:]
        assert time.monotonic() < deadline, "no worker started within 90 s"
        time.sleep(0.1)
    return orch


def test_ctrl_c_deletes_the_job_and_leaves_no_pod_process(api, nodes, tmp_path):
    orch = _training(api, tmp_path)
    assert nodes.pids()
    os.kill(orch.pid, signal.SIGINT)
    assert orch.wait(timeout=60) == 130, orch.stderr()[-3000:]
    assert [policy for _, policy in api.cluster.deletes] == ["Foreground"]
    assert nodes.pids() == [] and api.cluster.pods == {}  # the orchestrator waited for the pods to go
    (results,) = (tmp_path / "logs").glob("*/*/round1/results.json")
    doc = json.loads(results.read_text())
    assert doc["status"] == "interrupted" and "Ctrl-C" in doc["reason"], doc["reason"]


def test_a_killed_orchestrators_guard_deletes_the_job(api, nodes, tmp_path):
    orch = _training(api, tmp_path)
    assert nodes.pids()
    seconds, left = signal_faults.kill_and_measure(orch, signal.SIGKILL, nodes.pids, timeout=40)
    assert left == [], f"pod processes left {seconds:.1f} s after the orchestrator was killed: {left}"
    assert [policy for _, policy in api.cluster.deletes] == ["Foreground"]  # k8s_delete.py, run by the guard

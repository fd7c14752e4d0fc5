"""The Kubernetes scheduler with the real ``kubernetes`` client against the API stand-in of
tests/infra/k8s_api.py (a thread on loopback), the CLI in this process: submission, the watch (and its 410),
log collection, each way a round ends, deletion, the orchestrator-death guard's command, and preflight.
The pods' "launchers" are the stand-in's scripted states plus the rank records a launcher would write into
the shared folder (as tests/test_slurm_scripts.py fakes Slurm): no real launcher runs here.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import pytest

from run_benchmarks.backends.schedulers import k8s as k8s_scheduler
from run_benchmarks.backends.schedulers import k8s_delete, k8s_job
from run_benchmarks.catalog.casename import parse as parse_case_name
from run_benchmarks.execute import rounds
from training.contract import perflog

from .conftest import write
from .infra.k8s_api import Cluster, StandIn, exited, running, unschedulable

CASE = "gpt2_tiny:torch:cpu:2:1"


PUBLISHED_PORT = 24680  # what pod 0's ports.py --publish chose (master_port auto), in the stand-in


def reported(cluster: Cluster, pod: dict, folder: Path) -> None:
    """What a node's launcher leaves: every rank's records where torchrun's --log-dir puts them, and its
    own lines as the pod's log; pod 0 also the master port it chose and published in its folder."""
    config = json.loads((folder.parent / "config.json").read_text())
    name, workload = parse_case_name(config["runtime"]["case_name"]), config["workload"]
    train, n, node = workload["train"], name.nprocs_per_node, int(pod["metadata"]["labels"]["job-name"] and
                                                                 folder.name.rsplit("noderank", 1)[1])
    tokens = train["micro_batch_size"] * workload["model"]["seq_len"]
    if node == 0:
        write(folder / "master_port", f"{PUBLISHED_PORT}\n")
    for local in range(n):
        rank = node * n + local
        records = [perflog.StartRecord(rank=rank, local_rank=local, node_rank=node, world_size=name.world_size,
                                       framework="torch", framework_version="2.13.0", device="cpu",
                                       precision="fp32", n_params=1000, flops_per_token=6000.0, flop_formula="6N",
                                       tokens_per_step=tokens)]
        records += [perflog.StepRecord(rank=rank, step=s, warmup=s < train["warmup_steps"], step_time_s=0.1,
                                       tokens=tokens, loss=6.0) for s in range(train["steps"])]
        records.append(perflog.EndRecord(rank=rank, steps=train["steps"], peak_memory_bytes=2**27,
                                         memory_total_bytes=2**34, memory_kind="rss"))
        out = folder / "torchrun" / "fake_0" / "attempt_0" / str(local)
        write(out / "stdout.log", "".join(perflog.format_record(r) + "\n" for r in records))
        write(out / "stderr.log", "")
    cluster.logs[(pod["metadata"]["name"], "launcher")] = f"node {node}: torchrun started\nnode {node}: done\n"


def says(*lines: str) -> Callable:
    def effect(cluster: Cluster, pod: dict, folder: Path) -> None:
        cluster.logs[(pod["metadata"]["name"], "launcher")] = "".join(line + "\n" for line in lines)
    return effect


def completes(index: int) -> list:
    return [(0.0, running(f"kind-worker{index}")), (0.05, reported), (0.1, exited(0, node=f"kind-worker{index}"))]


def hangs(index: int) -> list:
    return [(0.0, running(f"kind-worker{index}"))]


class FakeGuard:
    def __init__(self, tag: str, cleanup=()):
        self.tag, self.cleanup, self.closed = tag, list(cleanup), None

    def close(self, disarm: bool = False) -> None:
        self.closed = "disarmed" if disarm else "armed: its delete runs"


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """``standin(script, **cluster)``: the API stand-in with pods following ``script``; guards recorded,
    rounds watched every 20 ms. Its ``cluster_file(**settings)`` points a run at it."""
    servers, guards = [], []
    monkeypatch.setattr(rounds, "POLL_S", 0.02)
    monkeypatch.setattr(k8s_scheduler, "LocalGuard", lambda tag, cleanup=(): guards.append(FakeGuard(tag, cleanup))
                        or guards[-1])
    monkeypatch.setattr(k8s_job, "GONE_GRACE_S", 2.0)

    def start(script=completes, **cluster) -> StandIn:
        server = StandIn(Cluster(script, **cluster), tmp_path)
        server.guards = guards
        servers.append(server)

        def cluster_file(**settings) -> Path:
            settings = {"namespace": "bench", "kubeconfig": str(server.kubeconfig), "image": "reg.example/torch:2.13",
                        "shared_dir": str(tmp_path / "shared"), "shared_claim": "bench-rwx", "poll_s": 0.2,
                        "pending_timeout_s": 0.5, **settings}
            lines = ["scheduler: kubernetes", "kubernetes:", *(f"  {k}: {json.dumps(v)}" for k, v in settings.items())]
            return write(tmp_path / "k8s.yaml", "\n".join(lines) + "\n")
        server.cluster_file = cluster_file
        return server
    yield start
    for server in servers:
        server.close()
    assert not [e for server in servers for e in server.cluster.errors]


def test_a_round_that_completes_is_ok_with_its_pods_logs_and_facts(accelbench, standin):
    api = standin(completes)
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["metrics"]["tokens_per_s_total"] > 0, doc["reason"]
    (name, policy), = api.cluster.deletes  # deleted after the round, in the foreground
    assert policy == "Foreground" and name.endswith("-r1") and api.cluster.jobs == {} and api.cluster.owned == {}
    nodes = doc["environment"]["nodes"]
    assert [n["host"] for n in nodes] == ["kind-worker0", "kind-worker1"]
    assert doc["environment"]["rendezvous"] == {
        "master_port": PUBLISHED_PORT, "chosen_by": "auto, chosen in the pod of index 0 when it starts"}
    assert [n["kubernetes"]["job"] for n in nodes] == [name, name]
    assert nodes[1]["kubernetes"]["pod"].startswith(f"{name}-1-") and nodes[1]["kubernetes"]["namespace"] == "bench"
    round_dir = Path(doc["results_path"]).parent
    assert (round_dir / "kubernetes_noderank1" / "launcher.log").read_text() == "node 1: torchrun started\nnode 1: done\n"
    assert (round_dir / "kubernetes_noderank1" / "rank1.stdout.log").is_file()
    (guard,) = api.guards
    assert guard.closed == "disarmed"  # accelbench deleted the Job itself
    assert guard.cleanup[1].endswith("k8s_delete.py") and guard.cleanup[2:] == [
        "--namespace", "bench", "--kubeconfig", str(api.kubeconfig), name]


@pytest.mark.parametrize("script, status, reason", [
    (lambda i: [(0.0, running("n0"))] if i == 0 else
     [(0.0, running("n1")), (0.05, says("step 3", "killed")), (0.1, exited(137, "OOMKilled", node="n1"))],
     "oom", "its launcher was OOMKilled (out of memory, exit 137); its last lines: step 3 | killed"),
    (lambda i: [(0.0, running("n0"))] if i == 0 else
     [(0.0, running("n1")), (0.05, says("Traceback (most recent call last):", "RuntimeError: boom")),
      (0.1, exited(1, node="n1"))],
     "failed", "its launcher exited with 1; its last lines: Traceback (most recent call last): | RuntimeError: boom"),
    (lambda i: [(0.0, unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."))],
     "failed", "not scheduled within 0.5 s: Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
], ids=["oomkilled", "exit-1", "pending-for-ever"])
def test_how_pods_end_becomes_the_rounds_status(accelbench, standin, script, status, reason):
    api = standin(script)
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == status and reason in doc["reason"], doc["reason"]
    assert [policy for _, policy in api.cluster.deletes] == ["Foreground"] and api.cluster.pods == {}


def test_a_watch_that_drops_with_410_is_listed_again(accelbench, standin):
    api = standin(completes)
    api.cluster.watch_410 = 2
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.results()[0]["status"] == "ok"
    assert api.cluster.watch_410 == 0  # both were served, and the run went on from fresh lists
    assert api.cluster.requests.count("GET /api/v1/namespaces/bench/pods") >= 3


def test_a_job_deleted_outside_accelbench_is_interrupted(accelbench, standin):
    def script(index: int) -> list:
        outside = [(0.2, lambda cluster, pod, folder: cluster.delete_job(pod["metadata"]["labels"]["job-name"]))]
        return [(0.0, running(f"n{index}")), *(outside if index == 0 else [])]
    api = standin(script)
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "interrupted", doc["reason"]
    assert "was deleted outside accelbench" in doc["reason"]
    assert [policy for _, policy in api.cluster.deletes] == [None]  # the outside delete; accelbench had none to do


def test_accelbenchs_deadline_deletes_the_job_and_is_a_timeout(accelbench, standin):
    api = standin(hangs)
    result = accelbench("run", CASE, "--timeout", "1", "--cluster", api.cluster_file())
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 1 s passed" in doc["reason"], doc["reason"]
    assert [policy for _, policy in api.cluster.deletes] == ["Foreground"] and api.cluster.pods == {}
    assert [g.closed for g in api.guards] == ["disarmed"]


def test_the_jobs_own_deadline_is_a_timeout(accelbench, standin):
    def script(index: int) -> list:
        def deadline(cluster, pod, folder):
            cluster.finish_job(pod["metadata"]["labels"]["job-name"], "DeadlineExceeded")
        failed = {"phase": "Failed", "reason": "DeadlineExceeded", "message": "Job was active longer than specified"}
        return [(0.0, running(f"n{index}")), (0.1, deadline), (0.1, failed)]
    api = standin(script)
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "activeDeadlineSeconds passed" in doc["reason"], doc["reason"]


def test_ctrl_c_deletes_the_job_in_the_foreground(accelbench, standin, monkeypatch):
    """Ctrl-C as the round loop meets it (a KeyboardInterrupt while it polls the nodes; a real SIGINT in this
    process would leave the CLI's handlers behind): the same stop as the deadline's, then the record."""
    api = standin(hangs)
    poll, pressed = k8s_job.NodeJob.poll, []

    def interrupted_once_running(job):
        code = poll(job)
        if job.job.pods.get(0, {}).get("status", {}).get("phase") == "Running" and not pressed:
            pressed.append(True)
            raise KeyboardInterrupt
        return code
    monkeypatch.setattr(k8s_job.NodeJob, "poll", interrupted_once_running)
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode != 0
    (doc,) = result.results()
    assert doc["status"] == "interrupted" and "Ctrl-C" in doc["reason"], doc["reason"]
    assert [policy for _, policy in api.cluster.deletes] == ["Foreground"] and api.cluster.pods == {}


def test_the_guards_command_deletes_the_job_in_the_foreground(standin):
    """What the parent-death guard runs when the orchestrator is killed (its argv, in this process)."""
    api = standin(hangs)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ab-x-r1", "labels": {"a": "b"}},
           "spec": {"completions": 1, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}}
    api.cluster.create_job(job)
    argv = ["--namespace", "bench", "--kubeconfig", str(api.kubeconfig), "ab-x-r1"]
    assert k8s_delete.main(argv) == 0
    assert api.cluster.deletes == [("ab-x-r1", "Foreground")] and api.cluster.pods == {}
    assert k8s_delete.main(argv) == 0  # already gone: nothing to do


def test_preflight_refuses_a_missing_namespace_and_too_few_devices(accelbench, standin, tmp_path):
    api = standin(completes, namespaces=("other",))
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 2 and "namespace 'bench' does not exist" in result.stderr, result.stderr
    assert "kubectl create namespace bench" in result.stderr and api.cluster.jobs == {}
    api = standin(completes, nodes={"gpu-1": {"nvidia.com/gpu": "8"}, "gpu-2": {"nvidia.com/gpu": "4"}})
    result = accelbench("run", "gpt2_tiny:torch:H100:2:8", "--timeout", "30", "--cluster", api.cluster_file())
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "1 schedulable node(s) offer 8 nvidia.com/gpu (allocatable: gpu-1 8, gpu-2 4); the case asks for 2" \
        in result.stderr
    assert not (tmp_path / "shared" / "code").exists()


def test_preflight_says_when_devices_cannot_be_known(accelbench, standin):
    api = standin(completes)
    api.cluster.forbid_nodes = True
    result = accelbench("run", "gpt2_tiny:torch:H100:2:8", "--timeout", "30", "--cluster", api.cluster_file())
    (doc,) = result.results()
    assert any("whether 2 node(s) offer 8 nvidia.com/gpu each cannot be known" in w for w in doc["warnings"])


def test_an_api_that_does_not_answer_is_refused_at_preflight(accelbench, standin, tmp_path):
    api = standin(completes)
    cluster = api.cluster_file()
    api.close()
    result = accelbench("run", CASE, "--timeout", "30", "--cluster", cluster)
    assert result.returncode == 2 and "does not answer" in result.stderr and "Traceback" not in result.stderr


def test_without_the_kubernetes_client_the_run_is_refused_with_the_extra_to_install(accelbench, standin, monkeypatch):
    api = standin(completes)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as if not installed
    result = accelbench("run", CASE, "--cluster", api.cluster_file())
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "needs the kubernetes Python client" in result.stderr and "accelbench[kubernetes]" in result.stderr
    assert api.cluster.jobs == {}

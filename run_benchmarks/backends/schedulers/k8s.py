"""``scheduler: kubernetes``: one Indexed Job per round (k8s_manifests), submitted and followed through the
official ``kubernetes`` client (k8s_client, the optional extra ``accelbench[kubernetes]``).

Code, configs and logs go to a ReadWriteMany volume that this machine sees at ``shared_dir`` and every
pod mounts at the same path, as Slurm's shared directory; the launcher's own output is the pod's log,
collected into ``launcher.log``. The pods are followed by a watch (re-listed after a 410). How pods end
becomes accelbench's outcomes in k8s_status. Ctrl-C, a signal, the deadline or the end of the round delete
the Job with foreground propagation (its Service and ConfigMap go with it by owner reference); when the
orchestrator is killed, its parent-death guard runs k8s_delete.py for the same deletion.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.hosts.local import LocalGuard
from run_benchmarks.backends.schedulers import k8s_manifests as manifests
from run_benchmarks.backends.schedulers import k8s_status as status
from run_benchmarks.backends.schedulers.base import SCHEDULERS, Scheduler, check_writable
from run_benchmarks.backends.schedulers.k8s_client import KubeClient
from run_benchmarks.backends.schedulers.slurm_script import MASTER_ADDR, NODE_ADDR

if TYPE_CHECKING:
    from run_benchmarks.results.round_result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan, RunPlan

GONE_GRACE_S = 60.0  # after the delete: how long the pods may take to go
LOG_LIMIT_BYTES = 64 * 2**20  # of one container's log, kept in the run folder
TAIL_LINES = 5  # of a failed pod's log, in the round's reason


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@SCHEDULERS.register("kubernetes")
class Kubernetes(Scheduler):
    name = "kubernetes"
    shared_folder = True
    checks_hosts = False  # this machine only sees the shared volume
    checks_framework = False  # the framework is the image's, run only in the pods

    @classmethod
    def master_address(cls, hosts: Sequence[HostSpec]) -> str:
        return MASTER_ADDR  # <job>-0.<service>, filled in when the round's manifests are rendered

    @classmethod
    def node_address(cls, host: HostSpec) -> str:
        return NODE_ADDR

    @classmethod
    def dry_run(cls, plan: "RunPlan", case: "CasePlan") -> list[str]:
        spec, rnd = plan.cluster.kubernetes, case.rounds[0]
        owner = manifests.owner_reference(manifests.object_name(case, rnd), "(the Job's uid, once created)")
        return [f"--- namespace {spec.namespace}: the Job, then its Service and ConfigMap",
                *manifests.as_yaml(manifests.manifests(spec, case, rnd, owner)).splitlines()]

    def __init__(self, plan: "RunPlan", hosts, runtimes, client: Optional[KubeClient] = None):
        super().__init__(plan, hosts, runtimes)
        self.spec: KubernetesSpec = plan.cluster.kubernetes
        self._client = client
        self.current: Optional[RoundJob] = None
        self.notes: list[str] = []  # what preflight could not know, in every round's warnings

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient(self.spec)
        return self._client

    # ------------------------------------------------------------ preflight

    def preflight(self) -> None:
        for case in self.plan.cases:
            manifests.image_of(self.spec, case)  # a missing image is refused before anything is queued
        client = self.client
        where = client.api.configuration.host
        try:
            client.version()
            known = client.namespace_exists()
        except Exception as exc:  # noqa: BLE001 - any failure to reach the API is the same refusal
            raise PreflightError(f"the Kubernetes API at {where} does not answer: {type(exc).__name__}: "
                                 f"{str(exc).strip()[:300]}", "check the kubeconfig (kubernetes.kubeconfig, "
                                 "context) and that kubectl cluster-info answers from this machine") from None
        if not known:
            raise PreflightError(f"namespace {self.spec.namespace!r} does not exist at {where} "
                                 "(kubernetes.namespace of the cluster file)",
                                 f"kubectl create namespace {self.spec.namespace}, or name an existing one")
        self._check_devices()
        check_writable(Path(self.spec.shared_dir), "kubernetes.shared_dir",
                       "mount the volume of kubernetes.shared_claim on this machine at that path, writable by you")

    def _check_devices(self) -> None:
        for case in self.plan.cases:
            resource = case.hardware.kind.kubernetes_resource
            if not resource:
                continue
            offered = self.client.allocatable(resource)
            if offered is None:
                self.notes.append(f"whether {case.name.nnodes} node(s) offer {case.name.nprocs_per_node} {resource} "
                                  "each cannot be known: this account may not list nodes")
                continue
            enough = sorted(n for n, count in offered.items() if count >= case.name.nprocs_per_node)
            if len(enough) < case.name.nnodes:
                raise PreflightError(
                    f"{case.name}: {len(enough)} schedulable node(s) offer {case.name.nprocs_per_node} "
                    f"{resource} (allocatable: {', '.join(f'{n} {c}' for n, c in sorted(offered.items())) or 'none'}); "
                    f"the case asks for {case.name.nnodes}",
                    f"lower nnodes or nprocs_per_node in the case name, or check the device plugin of {resource}")

    # ------------------------------------------------------------ a round

    def start_round(self, case: "CasePlan", rnd: "RoundPlan", result: "RoundResult",
                    jobs: dict[int, Job], monitors: dict[int, Job]) -> None:
        self.close()  # the previous round's job: its logs kept, deleted, its guard gone
        result.warnings += self.notes
        job, service, config = manifests.manifests(self.spec, case, rnd)
        name = job["metadata"]["name"]
        from run_benchmarks import signals
        with signals.deferred():  # a created job is in ``jobs`` before a signal can act
            guard = LocalGuard(f"k8s-{uuid.uuid4().hex}", cleanup=self._delete_argv(name))
            round_job = RoundJob(self.client, self.spec, name, case.name.nnodes, guard)
            try:
                round_job.uid = self.client.create(job, [service, config])
            except BaseException:
                round_job.close()
                raise
            self.current = round_job
            round_job.follow()
            for node in rnd.nodes:
                jobs[node.node_rank] = NodeJob(round_job, node.node_rank)

    def _delete_argv(self, name: str) -> list[str]:
        """The guard's cleanup: k8s_delete.py run as a file by this interpreter, every value one argument."""
        argv = [sys.executable, str(Path(manifests.__file__).with_name("k8s_delete.py")),
                "--namespace", self.spec.namespace]
        kubeconfig = self.spec.kubeconfig or os.environ.get("KUBECONFIG")
        if kubeconfig or Path("~/.kube/config").expanduser().is_file():
            argv += ["--kubeconfig", os.path.expanduser(kubeconfig or "~/.kube/config")]
        if self.spec.context:
            argv += ["--context", self.spec.context]
        return [*argv, name]

    def live_dir(self, node: "NodePlan") -> Path:
        return Path(node.remote_dir)

    def conclude(self, ending: str, result: "RoundResult") -> str:
        job = self.current
        if job is None or ending == "interrupted":
            return ending
        job.collect_logs()
        info = job.read_job()
        if info is None and not job.deleted_by_us:
            result.reason = f"job {job.name} was deleted outside accelbench (kubectl delete, or the site's policy)"
            return "cancelled"
        states = [job.state(rank) for rank in range(job.nnodes)]
        if status.job_failure(info) == "DeadlineExceeded" or any(s.outcome == status.TIMEOUT for s in states):
            result.reason = f"the Job's activeDeadlineSeconds passed: job {job.name} DeadlineExceeded"
            return "timeout"
        return ending

    def node_facts(self, node: "NodePlan") -> dict:
        job = self.current
        facts = {"scheduler": "kubernetes", "namespace": self.spec.namespace, "job": None, "pod": None,
                 "node": None}
        if job is not None:
            pod = job.pods.get(node.node_rank) or job.last_pods.get(node.node_rank) or {}
            facts.update(job=job.name, pod=(pod.get("metadata") or {}).get("name"),
                         node=(pod.get("spec") or {}).get("nodeName"))
        return {"host": facts["node"] or "kubernetes", "kubernetes": facts}

    def fetch_logs(self, node: "NodePlan") -> None:
        import shutil
        shutil.copytree(Path(node.remote_dir), node.log_dir, dirs_exist_ok=True)
        if self.current is not None:
            self.current.collect_logs()
            for container, path in ((manifests.LAUNCHER, node.launcher_log), (manifests.MONITOR, node.monitor_log)):
                text = self.current.logs.get((node.node_rank, container))
                if text is not None:
                    path.write_text(text, encoding="utf-8")

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


class RoundJob:
    """The Job of one round as its nodes' views share it: pods followed by a watch in a thread, logs kept
    before the Job goes, deleted once."""

    def __init__(self, client: KubeClient, spec: KubernetesSpec, name: str, nnodes: int, guard,
                 now: Callable[[], datetime] = _utcnow):
        self.client, self.spec, self.name, self.nnodes, self.guard, self.now = client, spec, name, nnodes, guard, now
        self.uid: Optional[str] = None
        self.selector = f"{manifests.JOB_LABEL}={name}"
        self.pods: dict[int, dict] = {}  # completion index -> the pod as last seen
        self.last_pods: dict[int, dict] = {}  # kept when a pod goes (deleted), for the record
        self.logs: dict[tuple[int, str], str] = {}
        self.relists = 0  # watches that ended with 410 Gone and were listed again
        self.deleted_by_us = False
        self.submitted = now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"watch {name}", daemon=True)

    def follow(self) -> None:
        self._refresh()  # the first list here: the nodes' first polls see the pods
        self._thread.start()

    def _refresh(self) -> str:
        pods, version = self.client.pods(self.selector)
        self.pods = {i: p for p in pods if (i := _index(p)) is not None}
        self.last_pods.update(self.pods)
        return version

    def _follow(self) -> None:
        version: Optional[str] = None
        timeout = max(1, math.ceil(self.spec.poll_s))
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._refresh()
                for kind, pod in self.client.watch_pods(self.selector, version, timeout):
                    version = (pod.get("metadata") or {}).get("resourceVersion") or version
                    index = _index(pod)
                    if index is not None:
                        self.last_pods[index] = pod
                        if kind == "DELETED":
                            self.pods.pop(index, None)
                        else:
                            self.pods[index] = pod
                    if self._stop.is_set():
                        return
            except Exception as exc:  # noqa: BLE001 - the watch is read again from a fresh list
                if getattr(exc, "status", None) == 410:
                    self.relists += 1
                elif not self._stop.wait(self.spec.poll_s):
                    pass
                version = None

    def state(self, rank: int) -> status.PodState:
        pod = self.pods.get(rank)
        if pod is not None:
            return status.read_pod(pod, self.now(), self.spec.pending_timeout_s)
        if rank in self.last_pods:  # it was there and went: its last state, else deleted (by us, or outside)
            last = status.read_pod(self.last_pods[rank], self.now(), self.spec.pending_timeout_s)
            if last.ended:
                return last
            return status.PodState(status.FAILED, None, f"pod {self.last_pods[rank]['metadata']['name']} was "
                                   "deleted" + ("" if self.deleted_by_us else " outside accelbench"))
        if (self.now() - self.submitted).total_seconds() > self.spec.pending_timeout_s:
            return status.PodState(status.NOT_SCHEDULED, None, f"no pod of job {self.name} for node {rank} within "
                                   f"{self.spec.pending_timeout_s:g} s (kubectl describe job {self.name})")
        return status.PodState(status.RUNNING)

    def read_job(self) -> Optional[dict]:
        return self.client.job(self.name)

    def collect_logs(self) -> None:
        """Each pod's launcher and monitor logs, while the pods still exist (a delete removes them)."""
        for rank, pod in self.last_pods.items():
            for container in (manifests.LAUNCHER, manifests.MONITOR):
                try:
                    text = self.client.log(pod["metadata"]["name"], container, limit_bytes=LOG_LIMIT_BYTES)
                except Exception:  # noqa: BLE001 - gone, or never started: keep what was read before
                    continue
                self.logs[(rank, container)] = text

    def tail(self, rank: int) -> list[str]:
        text = self.logs.get((rank, manifests.LAUNCHER), "")
        return [line for line in text.splitlines() if line.strip()][-TAIL_LINES:]

    def delete(self, grace_s: float) -> None:
        if self.deleted_by_us:
            return
        self.collect_logs()
        self.deleted_by_us = True
        self.client.delete_job(self.name)
        deadline = time.monotonic() + grace_s + GONE_GRACE_S
        while self.pods and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        try:
            self.delete(0)
            deleted = True
        except Exception:  # noqa: BLE001 - the guard deletes it when this process ends
            deleted = False
        self._stop.set()
        self.guard.close(disarm=deleted)


def _index(pod: dict) -> Optional[int]:
    meta = pod.get("metadata") or {}
    value = (meta.get("labels") or {}).get(manifests.INDEX_LABEL) or \
        (meta.get("annotations") or {}).get(manifests.INDEX_LABEL)
    return int(value) if value is not None and str(value).isdigit() else None


class NodeJob(Job):
    """One node of a round's Job: its pod's launcher exit code; a pod that ended without one (not
    scheduled, the deadline, evicted, deleted) reads as 1 with its reason as the node's ending."""

    def __init__(self, job: RoundJob, rank: int):
        self.job, self.rank = job, rank

    def poll(self) -> Optional[int]:
        state = self.job.state(self.rank)
        if not state.ended:
            return None
        return state.exit_code if state.exit_code is not None else 1

    def stop(self, grace_s: float = 10.0) -> None:
        self.job.delete(grace_s)

    def ending(self) -> Optional[str]:
        state = self.job.state(self.rank)
        if state.why is None:
            return None
        tail = self.job.tail(self.rank) if state.outcome in (status.FAILED, status.OOM) else []
        return state.why + (f"; its last lines: {' | '.join(tail)}" if tail else "")

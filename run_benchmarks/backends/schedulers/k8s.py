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

import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.hosts.local import LocalGuard
from run_benchmarks.backends.schedulers import k8s_manifests as manifests
from run_benchmarks.backends.schedulers import k8s_status as status
from run_benchmarks.backends.schedulers.base import Scheduler, check_writable, clear_port_file
from run_benchmarks.backends.schedulers.shared_copy import copy_node_folder
from run_benchmarks.backends.schedulers.k8s_client import KubeClient, described, kubeconfig
from run_benchmarks.backends.schedulers.k8s_job import NodeJob, RoundJob
from run_benchmarks.backends.schedulers.slurm_script import MASTER_ADDR, NODE_ADDR

if TYPE_CHECKING:
    from run_benchmarks.results.rounds.result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan, RunPlan

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
    def port_chooser(cls, rnd: "RoundPlan") -> str:
        return "chosen in the pod of index 0 when it starts"

    @classmethod
    def dry_run(cls, plan: "RunPlan", case: "CasePlan") -> list[str]:
        spec, rnd = plan.cluster.kubernetes, case.rounds[0]
        owner = manifests.owner_reference(manifests.object_name(case, rnd), "(the Job's uid, once created)")
        return [*described(spec),  # the commands a kubeconfig makes the client run, and whether allowed
                f"--- namespace {spec.namespace}: the Job, then its Service and ConfigMap",
                *manifests.as_yaml(manifests.manifests(spec, case, rnd, owner)).splitlines()]

    def __init__(self, plan: "RunPlan", hosts, runtimes, client: Optional[KubeClient] = None):
        super().__init__(plan, hosts, runtimes)
        self.spec: KubernetesSpec = plan.cluster.kubernetes
        self._client = client
        self.current: Optional[RoundJob] = None
        self.notes: list[str] = []  # what preflight could not know, in every round's warnings
        self.pending: list[str] = []  # the previous round's failed delete, in the next round's warnings

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
        result.warnings += [*self.notes, *self.pending]
        self.pending = []
        clear_port_file(rnd)
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
        config = kubeconfig(self.spec)  # a $KUBECONFIG list as it is: k8s_delete.py's client merges it too
        if config is not None:
            argv += ["--kubeconfig", config]
        if self.spec.context:
            argv += ["--context", self.spec.context]
        return [*argv, name]

    def live_dir(self, node: "NodePlan") -> Path:
        return Path(node.remote_dir)

    def conclude(self, ending: str, result: "RoundResult") -> str:
        job = self.current
        if job is None or ending == "interrupted":
            return ending
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
        copy_node_folder(Path(node.remote_dir), node.log_dir)  # regular files only, capped
        if self.current is not None:
            self.current.collect_logs()
            for container, path in ((manifests.LAUNCHER, node.launcher_log), (manifests.MONITOR, node.monitor_log)):
                text = self.current.logs.get((node.node_rank, container))
                if text is not None:
                    path.write_text(text, encoding="utf-8")

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            for line in self.current.warnings:  # a failed delete: said now, and in the next round's record
                print(f"accelbench: warning: {line}", file=sys.stderr)
            self.pending += self.current.warnings
            self.current = None

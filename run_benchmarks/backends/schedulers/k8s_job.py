"""A Kubernetes round's Job as its nodes see it: the pods followed by a watch in a thread (listed again after
a 410 Gone), each pod's logs kept before the Job goes, one foreground delete. ``NodeJob`` is one node's
view for the round loop: its pod's launcher exit code, or 1 with the reason when the pod ended without
one (not scheduled, the deadline, evicted, deleted)."""
from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Optional

from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.schedulers import k8s_manifests as manifests
from run_benchmarks.backends.schedulers import k8s_status as status
from run_benchmarks.backends.schedulers.k8s_client import KubeClient

GONE_GRACE_S = 60.0  # after the delete: how long the pods may take to go
LOG_LIMIT_BYTES = 64 * 2**20  # of one container's log, kept in the run folder
TAIL_LINES = 5  # of a failed pod's log, in the round's reason


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


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
        self._final: set[tuple[int, str]] = set()  # logs read after their pod ended: complete
        self.relists = 0  # watches that ended with 410 Gone and were listed again
        self.deleted_by_us = False  # set once delete_job returned (a 404 counts): never on a failed call
        self.warnings: list[str] = []  # what the caller should tell: a delete that failed twice
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
        """Each pod's launcher and monitor logs, while the pods still exist (a delete removes them); read
        once more only while a pod may still write."""
        for rank, pod in list(self.last_pods.items()):  # a copy: the watch thread writes to it
            spec = pod.get("spec") or {}
            names = {c.get("name") for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]}
            for container in (manifests.LAUNCHER, manifests.MONITOR):
                if container not in names or (rank, container) in self._final:
                    continue
                ended = self.state(rank).ended
                try:
                    self.logs[(rank, container)] = self.client.log(pod["metadata"]["name"], container,
                                                                   limit_bytes=LOG_LIMIT_BYTES)
                except Exception:  # noqa: BLE001 - gone, or never started: keep what was read before
                    continue
                if ended:
                    self._final.add((rank, container))

    def tail(self, rank: int) -> list[str]:
        text = self.logs.get((rank, manifests.LAUNCHER), "")
        return [line for line in text.splitlines() if line.strip()][-TAIL_LINES:]

    def delete(self, grace_s: float) -> None:
        if self.deleted_by_us:
            return
        self.collect_logs()
        self.client.delete_job(self.name)  # raises on failure: the flag stays down, a later call tries again
        self.deleted_by_us = True
        deadline = time.monotonic() + grace_s + GONE_GRACE_S
        while self._refresh_pods() and time.monotonic() < deadline:  # listed: the watch may lag
            time.sleep(min(self.spec.poll_s, 0.2))

    def _refresh_pods(self) -> dict:
        try:
            self._refresh()
        except Exception:  # noqa: BLE001 - the API is gone: what the watch saw last stands
            return {}
        return self.pods

    def close(self) -> None:
        """Delete (one retry when the first call fails); the guard is disarmed only once the delete worked."""
        error: Optional[BaseException] = None
        for _ in range(2):
            try:
                self.delete(0)
                error = None
                break
            except Exception as exc:  # noqa: BLE001 - tried once more, then left to the guard
                error = exc
        self._stop.set()
        if error is not None:
            self.warnings.append(f"deleting job {self.name} failed twice ({type(error).__name__}: {error}); its "
                                 "guard stays armed and deletes it when accelbench ends (check: kubectl get job "
                                 f"{self.name})")
        self.guard.close(disarm=error is None)


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

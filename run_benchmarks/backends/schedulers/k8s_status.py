"""How a round's pods and Job read as accelbench's outcomes, from the API's JSON form (pure).

A pod's launcher container, once terminated, gives the node's exit code; ``OOMKilled`` says "out of
memory" (the round becomes ``oom``). A pod still Pending past ``pending_timeout_s`` was not scheduled: the
scheduler's own reason (``Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu``) or the
kubelet's (``ErrImagePull``) is the node's ending. ``DeadlineExceeded`` (the Job's activeDeadlineSeconds)
is a timeout; a pod evicted or lost with its node is a failure naming the node.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

RUNNING, DONE, FAILED, OOM, NOT_SCHEDULED, TIMEOUT = "running", "done", "failed", "oom", "not_scheduled", "timeout"


@dataclass(frozen=True)
class PodState:
    outcome: str  # one of the names above
    exit_code: Optional[int] = None  # the launcher's, once it ended
    why: Optional[str] = None  # the node's ending, where its exit code alone would mislead
    node: Optional[str] = None  # the Kubernetes node it was placed on

    @property
    def ended(self) -> bool:
        return self.outcome != RUNNING


def _when(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    stamp = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def _container(pod: dict, name: str) -> dict:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name:
            return status
    return {}


def _pending_reason(pod: dict, launcher: dict) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or 'no reason given'}"
    waiting = (launcher.get("state") or {}).get("waiting") or {}
    if waiting:
        return f"{waiting.get('reason') or 'Waiting'}: {waiting.get('message') or 'no message'}"
    return "Pending: no reason given"


def read_pod(pod: dict, now: datetime, pending_timeout_s: float, container: str = "launcher") -> PodState:
    """One pod as an outcome; ``now`` is timezone-aware (the API's clock is UTC)."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name", "?")
    node = (pod.get("spec") or {}).get("nodeName")
    launcher = _container(pod, container)
    ended = (launcher.get("state") or {}).get("terminated")
    if ended:
        code, reason = int(ended.get("exitCode", 1)), ended.get("reason") or ""
        where = f"pod {name}" + (f" on node {node}" if node else "")
        if reason == "OOMKilled":
            return PodState(OOM, code, f"{where}: its launcher was OOMKilled (out of memory, exit {code})", node)
        if code == 0:
            return PodState(DONE, 0, None, node)
        return PodState(FAILED, code, f"{where}: its launcher exited with {code}" + (f" ({reason})" if reason
                                                                                     not in ("", "Error") else ""),
                        node)
    phase = status.get("phase") or "Pending"
    if phase == "Failed":  # the pod ended without its launcher's code: the Job's deadline, an eviction
        reason, message = status.get("reason") or "", status.get("message") or ""
        if reason == "DeadlineExceeded":
            return PodState(TIMEOUT, None, f"pod {name}: the Job's activeDeadlineSeconds passed", node)
        return PodState(FAILED, None, f"pod {name} failed on node {node or '?'}: {reason or 'no reason'}"
                                      + (f": {message}" if message else ""), node)
    if phase == "Succeeded":
        return PodState(DONE, 0, None, node)
    if phase == "Pending":
        created = _when((pod.get("metadata") or {}).get("creationTimestamp"))
        if created is not None and (now - created).total_seconds() > pending_timeout_s:
            return PodState(NOT_SCHEDULED, None, f"pod {name} not scheduled within {pending_timeout_s:g} s: "
                                                 f"{_pending_reason(pod, launcher)}", node)
    return PodState(RUNNING, None, None, node)


def job_failure(job: Optional[dict]) -> Optional[str]:
    """The Job's own Failed condition's reason (``DeadlineExceeded``, ``BackoffLimitExceeded``), if any."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return condition.get("reason") or "Failed"
    return None

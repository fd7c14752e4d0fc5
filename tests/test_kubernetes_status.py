"""How pods and Jobs read as accelbench's outcomes (k8s_status), on canned objects in the API's JSON form,
shaped as a cluster reports them: a pod the scheduler cannot place, one whose image cannot be pulled,
OOMKilled, a crash, success, the Job's deadline, an eviction."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from run_benchmarks.backends.schedulers.k8s_status import (DONE, FAILED, NOT_SCHEDULED, OOM, RUNNING, TIMEOUT,
                                                           job_failure, read_pod)

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


def pod(phase: str, age_s: float = 10, node: str = "gpu-7", launcher_state: dict | None = None, **status) -> dict:
    created = (NOW - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    statuses = [{"name": "monitor", "state": {"running": {}}}]
    if launcher_state is not None:
        statuses.append({"name": "launcher", "ready": False, "restartCount": 0, "state": launcher_state})
    return {"metadata": {"name": "ab-job-r1-1-x7k2p", "creationTimestamp": created},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, "containerStatuses": statuses, **status}}


UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are "
                             "available: 4 No preemption victims found for incoming pod."}]


@pytest.mark.parametrize("obj, outcome, code, why", [
    (pod("Pending", age_s=10, node="", conditions=UNSCHEDULABLE), RUNNING, None, None),  # not yet past the limit
    (pod("Pending", age_s=400, node="", conditions=UNSCHEDULABLE), NOT_SCHEDULED, None,
     "pod ab-job-r1-1-x7k2p not scheduled within 300 s: Unschedulable: 0/4 nodes are available: 4 Insufficient "
     "nvidia.com/gpu."),
    (pod("Pending", age_s=400, launcher_state={"waiting": {"reason": "ImagePullBackOff",
                                                          "message": 'Back-off pulling image "reg/x:1"'}}),
     NOT_SCHEDULED, None, 'not scheduled within 300 s: ImagePullBackOff: Back-off pulling image "reg/x:1"'),
    (pod("Running", launcher_state={"running": {"startedAt": "2026-11-25T11:59:00Z"}}), RUNNING, None, None),
    (pod("Failed", launcher_state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), OOM, 137,
     "pod ab-job-r1-1-x7k2p on node gpu-7: its launcher was OOMKilled (out of memory, exit 137)"),
    (pod("Failed", launcher_state={"terminated": {"exitCode": 1, "reason": "Error"}}), FAILED, 1,
     "pod ab-job-r1-1-x7k2p on node gpu-7: its launcher exited with 1"),
    (pod("Failed", launcher_state={"terminated": {"exitCode": 139, "reason": "ContainerCannotRun"}}), FAILED, 139,
     "its launcher exited with 139 (ContainerCannotRun)"),
    (pod("Succeeded", launcher_state={"terminated": {"exitCode": 0, "reason": "Completed"}}), DONE, 0, None),
    # the launcher ended, the monitor sidecar still stops: the launcher's code counts
    (pod("Running", launcher_state={"terminated": {"exitCode": 0, "reason": "Completed"}}), DONE, 0, None),
    (pod("Failed", reason="DeadlineExceeded", message="Pod was active on the node longer than the specified "
                                                      "deadline"), TIMEOUT, None, "activeDeadlineSeconds passed"),
    (pod("Failed", reason="Evicted", message="The node was low on resource: memory."), FAILED, None,
     "pod ab-job-r1-1-x7k2p failed on node gpu-7: Evicted: The node was low on resource: memory."),
], ids=["pending-young", "unschedulable", "image-pull", "running", "oomkilled", "exit-1", "cannot-run", "succeeded",
        "sidecar-stopping", "deadline", "evicted"])
def test_pod_states_become_outcomes(obj, outcome, code, why):
    state = read_pod(obj, NOW, pending_timeout_s=300)
    assert (state.outcome, state.exit_code) == (outcome, code)
    assert state.ended == (outcome != RUNNING)
    if why is None:
        assert state.why is None
    else:
        assert why in state.why, state.why


def test_an_oom_reads_as_out_of_memory_for_the_round():
    """The round's classifier looks for "out of memory" in the nodes' endings (execute/outcome.py)."""
    state = read_pod(pod("Failed", launcher_state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), NOW, 300)
    assert "out of memory" in state.why and state.node == "gpu-7"


def test_the_jobs_failed_condition_is_read():
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    complete = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert job_failure(failed) == "DeadlineExceeded"
    assert job_failure(complete) is None and job_failure(None) is None

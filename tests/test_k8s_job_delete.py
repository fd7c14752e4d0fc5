"""RoundJob's delete with a stub client (no API, no thread): a delete_job that raises leaves the job not
deleted, close() tries once more and keeps the guard armed when that fails too; a 404 counts as deleted;
collect_logs walks a copy of last_pods while the watch thread may write to it."""
from __future__ import annotations

from run_benchmarks.backends.schedulers import k8s_manifests as manifests
from run_benchmarks.backends.schedulers.k8s_job import RoundJob
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec

SPEC = KubernetesSpec(shared_dir="/shared", shared_claim="claim", poll_s=0.01)


class Guard:
    closed = None

    def close(self, disarm: bool = False) -> None:
        self.closed = "disarmed" if disarm else "armed"


class Client:
    """delete_job fails ``failures`` times, then answers ``found`` (False: the API's 404)."""

    def __init__(self, failures: int, found: bool = True):
        self.failures, self.found, self.deletes = failures, found, 0

    def delete_job(self, name: str) -> bool:
        self.deletes += 1
        if self.deletes <= self.failures:
            raise ConnectionError("the API did not answer")
        return self.found

    def pods(self, selector: str):
        return [], "1"


def job(client) -> tuple[RoundJob, Guard]:
    guard = Guard()
    return RoundJob(client, SPEC, "ab-1", 1, guard), guard


def test_a_failed_delete_leaves_the_job_not_deleted_so_stop_tries_again():
    round_job, _ = job(Client(failures=1))
    try:
        round_job.delete(0)
    except ConnectionError:
        pass
    assert round_job.deleted_by_us is False
    round_job.delete(0)  # a later stop(): not skipped
    assert round_job.deleted_by_us is True and round_job.client.deletes == 2


def test_close_retries_a_failed_delete_once_and_disarms_when_it_works():
    round_job, guard = job(Client(failures=1))
    round_job.close()
    assert (guard.closed, round_job.client.deletes, round_job.warnings) == ("disarmed", 2, [])


def test_close_keeps_the_guard_armed_and_warns_when_the_delete_fails_twice():
    round_job, guard = job(Client(failures=5))
    round_job.close()
    assert guard.closed == "armed" and round_job.client.deletes == 2 and not round_job.deleted_by_us
    assert len(round_job.warnings) == 1 and "guard stays armed" in round_job.warnings[0]


def test_a_job_already_gone_404_counts_as_deleted():
    round_job, guard = job(Client(failures=0, found=False))
    round_job.close()
    assert round_job.deleted_by_us and guard.closed == "disarmed"


def test_collect_logs_survives_the_watch_adding_pods_meanwhile():
    class Writer(Client):
        def log(self, pod, container, limit_bytes=None):
            round_job.last_pods[len(round_job.last_pods)] = pod_of(len(round_job.last_pods))  # the watch thread
            return f"{pod} {container}"

    def pod_of(rank: int) -> dict:
        return {"metadata": {"name": f"p{rank}"}, "spec": {"containers": [{"name": manifests.LAUNCHER}]}}

    round_job, _ = job(Writer(failures=0))
    round_job.last_pods[0] = pod_of(0)
    round_job.collect_logs()  # iterating the dict itself: RuntimeError, dictionary changed size
    assert round_job.logs[(0, manifests.LAUNCHER)] == f"p0 {manifests.LAUNCHER}"

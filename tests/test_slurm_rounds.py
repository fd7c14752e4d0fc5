"""Slurm rounds through a fake Slurm (tests/slurm_canned.py), in this process: how a job's states become a
round's status, what a round records of its job and nodes, sweeps, and the refusals of preflight. Moved from
tests/test_slurm_scripts.py (each test asserts what it asserted there). What needs a real Slurm is in
tests/test_slurm.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_benchmarks.backends.schedulers.slurm_client import SlurmClient

from .slurm_canned import (CHOSEN_PORT, NODE_STATES_ONE_DOWN, SCONTROL, SINFO_BUSY, SINFO_UNUSABLE,  # noqa: F401
                           CannedClient, _done, completes, exits, fake_cluster, fake_slurm, hangs, pends, started)
from .test_slurm_scripts import CASE, cluster_file

def test_a_completed_job_whose_ranks_reported_is_an_ok_round_with_its_nodes_facts(accelbench, fake_slurm, tmp_path):
    fake = fake_slurm(completes)
    result = accelbench("run", CASE, "--cluster", fake_cluster(tmp_path, time_limit="10"))
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["metrics"]["tokens_per_s_total"] > 0, doc["reason"]
    (job,) = fake.jobs.values()
    assert job.argv[:6] == ["sbatch", "--parsable", f"--job-name=accelbench-{doc['run_id']}-gpt2_tiny-torch-cpu-2x1-r1",
                            "--nodes=2", "--ntasks-per-node=1", "--partition=debug"]
    assert "--time=10" in job.argv and job.argv[-1] == str(job.folder / "job.sbatch")
    assert (job.folder / "job.sbatch").is_file() and (job.folder / "node.sh").is_file()
    nodes = doc["environment"]["nodes"]
    assert [n["slurm"] for n in nodes] == [
        {"scheduler": "slurm", "partition": "debug", "job_id": job.job_id, "nodelist": "node[1-2]", "node": "node1",
         "address": "127.0.0.2"},
        {"scheduler": "slurm", "partition": "debug", "job_id": job.job_id, "nodelist": "node[1-2]", "node": "node2",
         "address": "127.0.0.3"}]
    assert [n["host"] for n in nodes] == ["node1", "node2"]
    # master_port auto: the port the batch script chose on the job's first node, recorded with the round
    assert doc["environment"]["rendezvous"] == {
        "master_port": CHOSEN_PORT, "chosen_by": "auto, chosen by the batch script on the job's first node when the "
                                                 "job starts"}
    round_dir = Path(doc["results_path"]).parent
    assert (round_dir / "job.sbatch").is_file() and (round_dir / "slurm_noderank1" / "rank1.stdout.log").is_file()
    # the job's processes carry the guard's tag; the guard is disarmed once the job has ended by itself
    (guard,) = fake.guards
    assert job.env["ACCELBENCH_JOB_TAG"] == guard.tag and guard.closed == "disarmed"
    assert guard.cleanup[-2:] == ["scancel", job.job_id] and job.scancels == 0


@pytest.mark.parametrize("script, status, reason", [
    # a rank crashed: srun ends the other node (143), node 1's launcher exits 1, the job FAILED
    (lambda job: [("RUNNING", (started,)), ("COMPLETING", (exits(143, 1),)), ("FAILED", ())],
     "failed", "node 1 (slurm): Slurm job 100 ended FAILED; its launcher exited with 1"),
    # node2 froze: no exit code from it; sinfo says which node stopped responding
    (lambda job: [("RUNNING", (started,)), ("COMPLETING", (exits(143, None),)), ("NODE_FAIL", ())],
     "failed", "node 1 (slurm): Slurm job 100 ended NODE_FAIL (node node2 stopped responding)"),
    (lambda job: [("RUNNING", (started,)), ("COMPLETING", (exits(143, 143),)), ("TIMEOUT", ())],
     "timeout", "Slurm's time limit (1) passed: job 100 TIMEOUT; every node was stopped"),
    (lambda job: [("RUNNING", (started,)), ("COMPLETING", (exits(143, 137),)), ("OUT_OF_MEMORY", ())],
     "oom", "out of memory: node 0 (slurm): Slurm job 100 ended OUT_OF_MEMORY (out of memory)"),
], ids=["FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"])
def test_how_a_job_ends_becomes_the_rounds_status(accelbench, fake_slurm, tmp_path, script, status, reason):
    """NODE_FAIL is canned here (and only here): the real path (a slurmd that stops answering, slurmctld
    ending its job after SlurmdTimeout) is no longer exercised end to end; it cost ~25 s a run. Likewise
    OUT_OF_MEMORY, which this machine's Slurm cannot produce (no memory cgroup)."""
    fake = fake_slurm(script, node_states=NODE_STATES_ONE_DOWN)
    result = accelbench("run", CASE, "--cluster", fake_cluster(tmp_path, time_limit="1"))
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == status and reason in doc["reason"], doc["reason"]
    assert fake.jobs["100"].scancels == 0  # Slurm ended it: accelbench had nothing to cancel
    assert [g.closed for g in fake.guards] == ["disarmed"]


def test_a_job_cancelled_outside_accelbench_is_interrupted(accelbench, fake_slurm, tmp_path):
    """The order a real scancel makes (tests/test_slurm.py ran it, and failed now and then): node 0's
    exit code is written while accelbench still holds the job's last state, RUNNING, and the job shows
    COMPLETING for seconds before CANCELLED. Stopping the other node then must not count as accelbench's
    own cancel, which would make the round a plain failure. poll_s 60: no poll refreshes the state on its
    own, as when the scancel lands between two polls."""
    fake = fake_slurm(lambda job: [("RUNNING", (started, exits(143, None))), ("COMPLETING", (exits(None, 143),)),
                                   ("CANCELLED", ())])
    result = accelbench("run", CASE, "--cluster", fake_cluster(tmp_path, poll_s=60, poll_max_s=60))
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "interrupted", doc["reason"]
    assert "job 100 was cancelled outside accelbench (scancel or the site's policy)" in doc["reason"]
    assert fake.jobs["100"].scancels == 0  # it was ending already: nothing for accelbench to cancel


def test_a_job_accelbench_cancels_at_its_deadline_is_a_timeout(accelbench, fake_slurm, tmp_path):
    fake = fake_slurm(hangs)
    result = accelbench("run", CASE, "--timeout", "1", "--cluster", fake_cluster(tmp_path))
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 1 s passed" in doc["reason"], doc["reason"]
    assert "outside" not in doc["reason"]  # CANCELLED, but by accelbench
    assert fake.jobs["100"].scancels == 1 and ["scancel", "100"] in fake.calls
    assert [g.closed for g in fake.guards] == ["disarmed"]  # cancelled and gone: no second scancel


def test_a_job_still_pending_at_the_deadline_is_cancelled_and_a_timeout(accelbench, fake_slurm, tmp_path):
    fake = fake_slurm(pends)
    result = accelbench("run", CASE, "--timeout", "1", "--cluster", fake_cluster(tmp_path))
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 1 s passed" in doc["reason"], doc["reason"]
    assert fake.jobs["100"].scancels == 1
    assert [n["slurm"]["node"] for n in doc["environment"]["nodes"]] == [None, None]  # it never ran anywhere
    assert SlurmClient.job(CannedClient(scontrol=_done([], SCONTROL["PENDING"])), "100").reason == "BeginTime"


def test_a_sweep_submits_each_point_as_its_own_job(accelbench, fake_slurm, tmp_path):
    fake = fake_slurm(completes)
    result = accelbench("sweep", CASE, "--grid", "train.micro_batch_size=1,2", "--cluster", fake_cluster(tmp_path),
                        "--log-root", tmp_path / "logs")
    assert result.returncode == 0, result.stderr + result.stdout
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "logs").glob("*/*/round1/results.json"))]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert sorted(d["workload"]["train"]["micro_batch_size"] for d in docs) == [1, 2]
    assert len({d["environment"]["nodes"][0]["slurm"]["job_id"] for d in docs}) == 2
    assert sorted(j.config["workload"]["train"]["micro_batch_size"] for j in fake.jobs.values()) == [1, 2]
    assert len({j.folder for j in fake.jobs.values()}) == 2


# ---------------------------------------------------------------- preflight, from canned sinfo


def test_an_unknown_partition_is_refused_at_preflight_with_the_partitions_listed(accelbench, fake_slurm, tmp_path):
    fake = fake_slurm()
    cluster = cluster_file(tmp_path / "slurm.yaml", tmp_path / "shared", partition="gpu")
    result = accelbench("run", CASE, "--cluster", cluster)
    assert result.returncode == 2, result.stderr
    assert "Slurm has no partition 'gpu'" in result.stderr and "use one of: debug" in result.stderr
    assert "Traceback" not in result.stderr
    assert fake.jobs == {} and not (tmp_path / "shared" / "code").exists()


def test_too_many_nodes_are_refused_at_preflight(accelbench, fake_slurm, tmp_path):
    fake_slurm(sinfo=SINFO_BUSY)  # nodes running other jobs still count
    result = accelbench("run", "gpt2_tiny:torch:cpu:3:1", "--cluster", fake_cluster(tmp_path))
    assert result.returncode == 2
    assert "2 usable node(s) of 2" in result.stderr and "a case asks for 3" in result.stderr
    fake_slurm(sinfo=SINFO_UNUSABLE)  # drained and not responding: not usable
    result = accelbench("run", CASE, "--cluster", fake_cluster(tmp_path))
    assert result.returncode == 2
    assert "0 usable node(s) of 2 (node1 drain, node2 down*); a case asks for 2" in result.stderr


def test_an_earlier_attempts_master_port_is_gone_before_the_round_is_submitted(tmp_path):
    """A retried round (its ranks never met) runs in the same shared folder: the nodes must wait for this
    attempt's port, never read the last one's (Slurm and Kubernetes clear it when they start the round)."""
    from run_benchmarks.backends.schedulers.base import clear_port_file
    from run_benchmarks.planner.build import build_run_plan
    from run_benchmarks.planner.inputs import load_inputs

    from .conftest import ROOT

    inputs = load_inputs(ROOT, None, cluster_file(tmp_path / "slurm.yaml", tmp_path / "shared"))
    rnd = build_run_plan(inputs, [CASE], "r", tmp_path / "logs").cases[0].rounds[0]
    stale = Path(rnd.nodes[0].host_dir) / "master_port"
    stale.parent.mkdir(parents=True)
    stale.write_text("23456\n")
    clear_port_file(rnd)
    assert not stale.exists()
    clear_port_file(rnd)  # none there: fine

"""Cases through a real Slurm on this machine (tests/infra/slurm.py): munged, slurmctld and two slurmd nodes
on 127.0.0.2 and 127.0.0.3. Each round is an sbatch job; its states become accelbench's statuses."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, write
from tests.infra.slurm import SlurmCluster, missing_tools
from tests.test_runs import SHORT, leftover_processes

CASE = "gpt2_tiny:torch:cpu:2:1"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = missing_tools()
    if missing:
        pytest.skip(f"no Slurm here: {', '.join(missing)} missing (./dev test installs slurmctld, slurmd, munge)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=2)
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.stop()
        pytest.fail(f"the test Slurm did not start: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm_file(slurm, tmp_path):
    def make(shared: Path | None = None, **settings) -> Path:
        shared = shared or tmp_path / "shared"
        lines = ["scheduler: slurm", "slurm:", "  partition: debug", f"  shared_dir: {json.dumps(str(shared))}",
                 f"  conf: {slurm.conf}", "  poll_s: 0.3", "  poll_max_s: 2"]
        lines += [f"  {key}: {json.dumps(value)}" for key, value in settings.items()]
        return write(tmp_path / "slurm.yaml", "\n".join(lines) + "\n")
    return make


def assert_nothing_left(slurm: SlurmCluster, shared: Path) -> None:
    """No job in the queue, no process of the run: the nodes are this machine, so a worker left behind on a
    node is a process here whose command line names the shared directory."""
    assert any((shared / "runs").iterdir()), "nothing ran under the shared directory: the check would be empty"
    deadline = time.monotonic() + 20
    while (slurm.queue() or leftover_processes(shared)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.queue() == []
    assert leftover_processes(shared) == []


@pytest.mark.parametrize("nprocs", [1, 2])
def test_two_nodes_through_slurm_give_the_results_of_a_local_run(cli, slurm, slurm_file, tmp_path, nprocs):
    marker = tmp_path / "executed"
    option = f"--comment=x; touch {marker} $(touch {marker})"  # a value with shell syntax stays a value
    shared = tmp_path / f"shared $(touch {marker}); `touch {marker}` & echo"
    cluster = slurm_file(shared=shared, sbatch_options=[option])
    result = cli("run", f"gpt2_tiny:torch:cpu:2:{nprocs}", *SHORT, "--cluster", str(cluster))
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["steps_completed"] == 8
    assert doc["metrics"]["tokens_per_s_total"] > 0
    nodes = doc["environment"]["nodes"]
    assert [n["slurm"]["node"] for n in nodes] == ["node1", "node2"]
    assert [n["slurm"]["address"] for n in nodes] == ["127.0.0.2", "127.0.0.3"]  # NodeAddr, distinct
    assert {n["slurm"]["job_id"] for n in nodes} == {nodes[0]["slurm"]["job_id"]}
    assert nodes[0]["slurm"]["partition"] == "debug" and nodes[0]["slurm"]["nodelist"] == "node[1-2]"
    round_dir = result.run_dirs()[0] / f"gpt2_tiny-torch-cpu-2x{nprocs}" / "round1"
    launcher = (round_dir / "slurm_noderank1" / "launcher.log").read_text()
    assert "127.0.0.2" in (round_dir / "node.sh").read_text() or "--master-addr=\"$master_addr\"" in \
        (round_dir / "node.sh").read_text()
    assert {f"rank{r}.stdout.log" for r in range(2 * nprocs)} <= {
        p.name for d in round_dir.glob("slurm_noderank*") for p in d.iterdir()}, launcher
    assert not marker.exists()
    # Identical in form to a local run of the same world size: the same record, key for key.
    local = cli("run", f"gpt2_tiny:torch:cpu:1:{2 * nprocs}", *SHORT, log_root=tmp_path / "local")
    assert local.returncode == 0, local.stderr
    (local_doc,) = local.results()
    assert set(doc) == set(local_doc)
    assert set(doc["metrics"]) == set(local_doc["metrics"])
    assert (shared / "code").is_dir()  # the odd name was used as a name
    assert_nothing_left(slurm, shared)


def test_a_rank_crash_is_a_failed_round_with_the_ranks_lines(cli, slurm, slurm_file, tmp_path):
    result = cli("run", CASE, *SHORT, "--set", "debug.fail_at_step=3", "--set", "debug.fail_rank=1",
                 "--cluster", str(slurm_file()))
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "failed"
    assert any("injected failure on rank 1 at step 3" in line for line in doc["error_lines"])
    assert "node 1" in doc["reason"]
    assert_nothing_left(slurm, tmp_path / "shared")


def test_a_job_past_its_time_limit_is_a_timeout_with_nothing_left_queued(cli, slurm, slurm_file, tmp_path):
    # Slurm enforces limits about every 30 s: a 1-minute limit ends the hung job within ~90 s.
    result = cli("run", CASE, *SHORT, "--set", "debug.hang_at_step=3", "--cluster",
                 str(slurm_file(time_limit="1")), timeout=400)
    assert result.returncode == 1, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "timeout"
    assert "Slurm's time limit (1) passed" in doc["reason"] and "TIMEOUT" in doc["reason"]
    assert_nothing_left(slurm, tmp_path / "shared")


def test_accelbench_own_deadline_cancels_the_job(cli, slurm, slurm_file, tmp_path):
    result = cli("run", CASE, *SHORT, "--set", "debug.hang_at_step=3", "--timeout", "25",
                 "--cluster", str(slurm_file()))
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 25 s passed" in doc["reason"]
    assert_nothing_left(slurm, tmp_path / "shared")


def _start_hung_run(slurm_file, tmp_path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", CASE, *SHORT, "--set", "debug.hang_at_step=3",
            "--cluster", str(slurm_file()), "--log-root", str(tmp_path / "logs")]
    return subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running_job(slurm: SlurmCluster, timeout_s: float = 90) -> str:
    """The id of the run's job once its launchers have reached the hang (rank 0 wrote step 2)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = [line.split()[0] for line in slurm.queue() if line.endswith("RUNNING")]
        if running:
            return running[0]
        time.sleep(0.5)
    raise AssertionError(f"no job running after {timeout_s} s: {slurm.queue()}")


def _results(tmp_path) -> dict:
    (path,) = (tmp_path / "logs").glob("*/*/round1/results.json")
    return json.loads(path.read_text())


def test_scancel_from_outside_is_interrupted(slurm, slurm_file, tmp_path):
    run = _start_hung_run(slurm_file, tmp_path)
    job = _running_job(slurm)
    time.sleep(5)  # the workers are up
    assert slurm.client(["scancel", job]).returncode == 0
    out, err = run.communicate(timeout=120)
    doc = _results(tmp_path)
    assert doc["status"] == "interrupted", err
    assert f"job {job} was cancelled outside accelbench" in doc["reason"]
    assert run.returncode == 1
    assert_nothing_left(slurm, tmp_path / "shared")


def test_ctrl_c_cancels_the_job_and_records_the_round(slurm, slurm_file, tmp_path):
    run = _start_hung_run(slurm_file, tmp_path)
    _running_job(slurm)
    time.sleep(5)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    doc = _results(tmp_path)
    assert doc["status"] == "interrupted" and "Ctrl-C" in doc["reason"]
    assert_nothing_left(slurm, tmp_path / "shared")


def test_a_killed_orchestrator_leaves_no_job(slurm, slurm_file, tmp_path):
    run = _start_hung_run(slurm_file, tmp_path)
    _running_job(slurm)
    run.kill()  # SIGKILL: the parent-death guard cancels the job
    run.communicate(timeout=30)
    assert_nothing_left(slurm, tmp_path / "shared")


def test_a_node_that_dies_mid_job_fails_the_round_naming_it(slurm, slurm_file, tmp_path):
    run = _start_hung_run(slurm_file, tmp_path)
    _running_job(slurm)
    time.sleep(5)
    frozen = slurm.freeze_node(1)  # node2 hangs: neither its slurmd nor its workers answer
    try:
        out, err = run.communicate(timeout=150)
        doc = _results(tmp_path)
        assert doc["status"] == "failed", err
        assert "NODE_FAIL" in doc["reason"] and "node node2 stopped responding" in doc["reason"]
    finally:
        slurm.kill_node(1, frozen)  # the machine is gone for good; then it comes back empty
        slurm.restart_node(1)
    assert_nothing_left(slurm, tmp_path / "shared")


def test_an_unknown_partition_is_refused_at_preflight_with_the_partitions_listed(cli, slurm, slurm_file, tmp_path):
    cluster = write(tmp_path / "bad.yaml", slurm_file().read_text().replace("partition: debug", "partition: gpu"))
    result = cli("run", CASE, *SHORT, "--cluster", str(cluster))
    assert result.returncode == 2, result.stderr
    assert "Slurm has no partition 'gpu'" in result.stderr and "use one of: debug" in result.stderr
    assert "Traceback" not in result.stderr
    assert slurm.queue() == [] and not (tmp_path / "shared" / "code").exists()


def test_too_many_nodes_are_refused_at_preflight(cli, slurm, slurm_file):
    result = cli("run", "gpt2_tiny:torch:cpu:3:1", *SHORT, "--cluster", str(slurm_file()))
    assert result.returncode == 2
    assert "2 usable node(s) of 2" in result.stderr and "a case asks for 3" in result.stderr


def test_a_case_name_with_shell_syntax_never_reaches_a_shell(cli, slurm_file, tmp_path):
    marker = tmp_path / "executed"
    result = cli("run", f"gpt2_tiny:torch:cpu:2:1;touch {marker}", "--cluster", str(slurm_file()))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert not marker.exists()


def test_dry_run_prints_the_job_with_every_value_quoted(cli, slurm_file, tmp_path):
    shared = tmp_path / "shared dir $(id)"
    result = cli("run", CASE, "--dry-run", "--cluster", str(slurm_file(shared=shared, account="bench",
                                                                       gres="gpu:2")))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ sbatch --parsable" in out and "--partition=debug" in out and "--account=bench" in out
    assert "--gres=gpu:2" in out and "--no-requeue" in out
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in out
    assert f"'{shared}/runs/" in out  # quoted as one word
    assert '--master-addr="$master_addr"' in out and '--local-addr="$node_addr"' in out
    assert not shared.exists()  # a dry run writes nothing


def test_cluster_file_errors_name_the_key(accelbench, tmp_path):
    bad = write(tmp_path / "c.yaml", "scheduler: slurm\nslurm:\n  partition: debug\n  shared_dir: rel/dir\n")
    result = accelbench("run", CASE, "--cluster", str(bad))
    assert result.returncode == 2
    assert "shared_dir 'rel/dir' must be an absolute path" in result.stderr
    bad = write(tmp_path / "c.yaml", "scheduler: slurm\nslurm:\n  partition: 'a b'\n  shared_dir: /x\n")
    result = accelbench("run", CASE, "--cluster", str(bad))
    assert result.returncode == 2 and "slurm.partition" in result.stderr
    bad = write(tmp_path / "c.yaml", "scheduler: slurm\nslurm:\n  partition: p\n  shared_dir: /x\n"
                "  sbatch_options: ['--exclusive; rm']\n")
    result = accelbench("run", CASE, "--dry-run", "--cluster", str(bad))
    assert result.returncode == 0  # an option is one argument, whatever it holds
    assert "'--exclusive; rm'" in result.stdout


def test_repeats_are_separate_jobs(cli, slurm, slurm_file, tmp_path):
    result = cli("run", CASE + ":2", *SHORT, "--cluster", str(slurm_file()))
    assert result.returncode == 0, result.stderr
    docs = result.results()
    assert [d["status"] for d in docs] == ["ok", "ok"]
    jobs = [d["environment"]["nodes"][0]["slurm"]["job_id"] for d in docs]
    assert len(set(jobs)) == 2
    assert_nothing_left(slurm, tmp_path / "shared")


def test_slurm_states_become_statuses():
    """The states this machine's Slurm cannot produce on demand (no memory cgroup here for OUT_OF_MEMORY)
    map through the same code as the ones the tests above produce."""
    from run_benchmarks.outcome import _OOM_MARKERS
    from run_benchmarks.schedulers.slurm import describe_end
    from run_benchmarks.schedulers.slurm_client import JobInfo

    oom = describe_end("7", JobInfo("7", "OUT_OF_MEMORY", "n[1-2]"), 137, {})
    assert oom == "Slurm job 7 ended OUT_OF_MEMORY (out of memory)"
    assert any(marker in oom for marker in _OOM_MARKERS)  # classify reads endings: status oom
    lost = describe_end("7", JobInfo("7", "NODE_FAIL", "n[1-2]"), None, {"n1": "alloc", "n2": "down*"})
    assert lost == "Slurm job 7 ended NODE_FAIL (node n2 stopped responding)"
    assert describe_end("7", JobInfo("7", "COMPLETED"), 0, {}) is None
    assert describe_end("7", JobInfo("7", "FAILED"), 1, {}) == "Slurm job 7 ended FAILED; its launcher exited with 1"


def test_a_sweep_submits_each_point_as_its_own_job(cli, slurm, slurm_file, tmp_path):
    result = cli("sweep", CASE, *SHORT, "--grid", "train.micro_batch_size=1,2", "--cluster", str(slurm_file()),
                 "--log-root", str(tmp_path / "logs"))
    assert result.returncode == 0, result.stderr + result.stdout
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "logs").glob("*/*/round1/results.json"))]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert sorted(d["workload"]["train"]["micro_batch_size"] for d in docs) == [1, 2]
    assert len({d["environment"]["nodes"][0]["slurm"]["job_id"] for d in docs}) == 2
    assert_nothing_left(slurm, tmp_path / "shared")

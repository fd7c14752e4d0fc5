"""Cases through a real Slurm on this machine (``slurm_cluster``, tests/infra/slurm.py: munged, slurmctld and
two slurmd nodes on 127.0.0.2 and 127.0.0.3, started once per session). Each round is an sbatch job.

Only what needs real jobs is here: a 2x2 case, a 1x1 case twice and a rank crash (one invocation), Ctrl-C, a
killed orchestrator, a scancel from outside, Slurm's time limit and accelbench's own deadline. Ctrl-C stops a
2-node job; the other endings cancel (or see Slurm end) the round's one job whole, whatever its nodes, so their
runs are one node of one rank (a job of two cost twice the processes and showed nothing more). That repeats are
separate jobs is shown by the 1x1 case's two rounds (the 2x2 case ran twice for it: a second 2x2 job cost four
ranks, two launchers and two monitors, ~24 s of CPU, against ~12 s for two 1x1 jobs). The submitted text, the
parsing of Slurm's output and the status of every job state are tested in this process, against output copied
from this cluster, in tests/test_slurm_scripts.py.

Every run trains a smaller gpt2_tiny (goldens.SMALL_MODEL): no test here reads a figure's size, and what the
full model computed beyond each rank's imports was CPU for nothing.

Every run of the module is started at once before its first test (``runs``: only those the selected tests
ask for), each ``accelbench run`` a process of its own with its own shared directory, its jobs sharing the
two nodes (``exclusive: false``). Tests wait on events with bounds (the run's job in squeue, rank 0's step
record, the process's exit), never a fixed sleep. The longest wait, Slurm's 1-minute time limit (enforced
every 30 s, so 60 to 90 s after the job starts), passes while the other runs work.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest
import yaml

from training.contract import perflog

from .conftest import ROOT, write
from .goldens import SMALL_MODEL
from .runner import ends_with_the_test
from .infra.slurm import SlurmCluster, processes_mentioning, wait_until

CASE = "gpt2_tiny:torch:cpu:2:1"
ONE = "gpt2_tiny:torch:cpu:1:1"  # a job of one node, one rank: what ends a round's job ends it whole (RoundJob)
TWO_BY_TWO = "gpt2_tiny:torch:cpu:2:2"
REPEATED = "gpt2_tiny:torch:cpu:1:1:2"  # two rounds: two jobs
STEPS, WARMUP = 6, 2
SHORT = {"train.steps": STEPS, "train.warmup_steps": WARMUP, **SMALL_MODEL}


def sets(settings: dict) -> list[str]:
    """``settings`` as the CLI's ``--set KEY=VALUE`` arguments."""
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


HANG = (*sets(SHORT), "--set", "debug.hang_at_step=1")
START_S = 240  # bound on a job's start, up to rank 0's first step, on two cores shared with the other runs


def cluster_file(path: Path, slurm: SlurmCluster, shared: Path, **settings) -> Path:
    settings = {"partition": "debug", "shared_dir": str(shared), "conf": str(slurm.conf), "poll_s": 0.3,
                "poll_max_s": 2, "exclusive": False, **settings}
    lines = ["scheduler: slurm", "slurm:", *(f"  {key}: {json.dumps(value)}" for key, value in settings.items())]
    return write(path, "\n".join(lines) + "\n")


class Run:
    """``accelbench run`` as a user starts it, in the background: a process of its own (Ctrl-C and SIGKILL
    reach it as they would), its output in files, its log root and shared directory in ``folder``."""

    def __init__(self, folder: Path, args: Sequence[str], shared: Optional[Path] = None):
        self.folder, self.shared, self.log_root = folder, shared, folder / "logs"
        (folder / "system-tmp").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "run_benchmarks.cli", "run", *args, "--log-root", str(self.log_root)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(folder / "system-tmp")}
        with open(folder / "stdout.log", "w") as out, open(folder / "stderr.log", "w") as err:
            self.process = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=err, preexec_fn=ends_with_the_test())

    @classmethod
    def through(cls, slurm: SlurmCluster, folder: Path, args: Sequence[str], shared: Optional[Path] = None,
                **settings) -> "Run":
        shared = shared or folder / "shared"
        return cls(folder, [*args, "--cluster", str(cluster_file(folder / "slurm.yaml", slurm, shared, **settings))],
                   shared)

    @property
    def stderr(self) -> str:
        return (self.folder / "stderr.log").read_text(errors="replace")

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run did not end in {timeout_s:g} s: {self.stderr[-3000:]}") from None

    def docs(self) -> list[dict]:
        """Every round's results.json, in case-folder and round order."""
        return [json.loads(p.read_text()) for p in sorted(self.log_root.glob("*/*/round*/results.json"))]

    def _rank0_stepped(self) -> bool:
        for path in self.shared.glob("runs/*/*/round1/slurm_noderank0/torchrun/*/attempt_*/0/stdout.log"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    if isinstance(perflog.parse_line(line), perflog.StepRecord):
                        return True
                except perflog.PerfLogError:
                    pass
        return False

    def job_at_step(self, slurm: SlurmCluster, timeout_s: float = START_S) -> str:
        """The run's job, once it is RUNNING and rank 0 has reported its first step (it hangs at the next)."""
        def ready():
            if self.process.poll() is not None:
                raise AssertionError(f"the run ended ({self.process.returncode}) before its job ran: "
                                     f"{self.stderr[-3000:]}")
            running = [job for job, state in slurm.jobs_under(self.shared).items() if state == "RUNNING"]
            return running[0] if running and self._rank0_stepped() else None
        return wait_until(ready, "running job whose rank 0 reported a step", timeout_s, every_s=0.3)

    def assert_nothing_left(self, slurm: SlurmCluster) -> None:
        """None of the run's jobs queued, running or completing, no process of it: the nodes are this machine,
        so a worker left behind on a node is a process here whose command line names the shared directory."""
        assert any((self.shared / "runs").iterdir()), "nothing ran under the shared directory: the check is empty"
        left = lambda: (slurm.jobs_under(self.shared), processes_mentioning(self.shared))  # noqa: E731
        wait_until(lambda: left() == ({}, []), "end of the run's jobs and processes", timeout_s=30, every_s=0.3,
                   detail=left)

    def stop(self, slurm: SlurmCluster) -> None:
        """After the module: a run still going is killed (its guard cancels its job), its jobs waited for."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.shared is not None:
            wait_until(lambda: not slurm.jobs_under(self.shared), "end of the run's jobs", timeout_s=60,
                       detail=lambda: slurm.jobs_under(self.shared))


# ---------------------------------------------------------------- the module's runs, started together

RUNS: dict[str, Callable[[SlurmCluster, Path], Run]] = {}


def background(start: Callable[[SlurmCluster, Path], Run]):
    """A run of the module: started with the others before the first test (see ``runs``), the fixture of
    the same name hands it to a test."""
    RUNS[start.__name__] = start

    @pytest.fixture(scope="module", name=start.__name__)
    def fixture(runs: dict[str, Run]) -> Run:
        return runs[start.__name__]
    fixture.__doc__ = start.__doc__
    return fixture


@pytest.fixture(scope="module", autouse=True)
def runs(request, slurm_cluster, tmp_path_factory) -> dict[str, Run]:
    """Start every run that a selected test of this module asks for, all at once."""
    wanted = {name for item in request.session.items if getattr(item, "module", None) is request.module
              for name in item.fixturenames if name in RUNS}
    started: dict[str, Run] = {}
    try:
        for name, start in RUNS.items():
            if name in wanted:
                started[name] = start(slurm_cluster, tmp_path_factory.mktemp(name))
        yield started
    finally:
        for run in started.values():
            run.stop(slurm_cluster)


@background
def time_limit_run(slurm, folder):
    """Hangs at step 1 under Slurm's shortest time limit, 1 minute (first: the longest wait)."""
    return Run.through(slurm, folder, [ONE, *HANG], time_limit="1")


@background
def ctrl_c_run(slurm, folder):
    return Run.through(slurm, folder, [CASE, *HANG])


@background
def killed_run(slurm, folder):
    return Run.through(slurm, folder, [ONE, *HANG])


@background
def scancel_run(slurm, folder):
    return Run.through(slurm, folder, [ONE, *HANG])


@background
def deadline_run(slurm, folder):
    """Hangs at step 1; accelbench's own deadline, 10 s, ends it."""
    return Run.through(slurm, folder, [ONE, *HANG, "--timeout", "10"])


@background
def two_cases_run(slurm, folder):
    """One invocation: gpt2_tiny 2x2, then 1x1 for 2 rounds (no time breakdown: its test reads only the
    rounds' jobs), then a 2x1 whose rank 1 crashes at step 1. The shared directory and an sbatch option hold
    shell syntax that must stay data (``folder/executed`` must not appear)."""
    marker = folder / "executed"
    conf = folder / "test_conf.yaml"
    conf.write_text(yaml.safe_dump({"cases": [
        {"case": TWO_BY_TWO, "set": SHORT},
        {"case": REPEATED, "set": {**SHORT, "train.breakdown_steps": 0}},
        {"case": CASE, "set": {**SHORT, "debug.fail_at_step": 1, "debug.fail_rank": 1}}]}))
    shared = folder / f"shared $(touch {marker}); `touch {marker}` & echo"
    return Run.through(slurm, folder, ["--test-conf", str(conf)], shared=shared,
                       sbatch_options=[f"--comment=x; touch {marker} $(touch {marker})"])


@background
def local_run(slurm, folder):
    """A local run (no Slurm), whose results.json the Slurm 2x2 round's must match key for key."""
    return Run(folder, [ONE, *sets(SHORT)])


# ---------------------------------------------------------------- signals and outside hands


def test_ctrl_c_cancels_the_job_and_records_the_round(slurm_cluster, ctrl_c_run):
    job = ctrl_c_run.job_at_step(slurm_cluster)
    ctrl_c_run.process.send_signal(signal.SIGINT)
    assert ctrl_c_run.wait(120) == 130, ctrl_c_run.stderr
    (doc,) = ctrl_c_run.docs()
    assert doc["status"] == "interrupted" and "Ctrl-C" in doc["reason"], doc["reason"]
    assert doc["environment"]["nodes"][0]["slurm"]["job_id"] == job
    ctrl_c_run.assert_nothing_left(slurm_cluster)


def test_a_killed_orchestrator_leaves_no_job(slurm_cluster, killed_run):
    killed_run.job_at_step(slurm_cluster)
    killed_run.process.kill()  # SIGKILL: the parent-death guard cancels the job
    killed_run.wait(30)
    killed_run.assert_nothing_left(slurm_cluster)


def test_scancel_from_outside_is_interrupted(slurm_cluster, scancel_run):
    """The real order of a scancel (the round must not take it for its own cancel: see
    test_slurm_scripts.test_a_job_cancelled_outside_accelbench_is_interrupted)."""
    job = scancel_run.job_at_step(slurm_cluster)
    assert slurm_cluster.client(["scancel", job]).returncode == 0
    assert scancel_run.wait(120) == 1, scancel_run.stderr
    (doc,) = scancel_run.docs()
    assert doc["status"] == "interrupted", doc["reason"]
    assert f"job {job} was cancelled outside accelbench" in doc["reason"]
    scancel_run.assert_nothing_left(slurm_cluster)


# ---------------------------------------------------------------- jobs that end by themselves


def test_a_2x2_case_through_slurm_gives_the_results_of_a_local_run(slurm_cluster, two_cases_run, local_run):
    assert two_cases_run.wait(400) == 1, two_cases_run.stderr  # the crashing case fails the run
    (doc,) = [d for d in two_cases_run.docs() if d["case_name"] == TWO_BY_TWO]
    assert doc["status"] == "ok" and doc["steps_completed"] == STEPS, doc["reason"]
    assert doc["metrics"]["tokens_per_s_total"] > 0
    nodes = doc["environment"]["nodes"]
    assert [n["slurm"]["node"] for n in nodes] == ["node1", "node2"]
    assert [n["slurm"]["address"] for n in nodes] == ["127.0.0.2", "127.0.0.3"]  # NodeAddr, distinct
    assert {n["slurm"]["job_id"] for n in nodes} == {nodes[0]["slurm"]["job_id"]}
    assert nodes[0]["slurm"]["partition"] == "debug" and nodes[0]["slurm"]["nodelist"] == "node[1-2]"
    round_dir = Path(doc["results_path"]).parent
    launcher = (round_dir / "slurm_noderank1" / "launcher.log").read_text()
    assert '--master-addr="$master_addr"' in (round_dir / "node.sh").read_text()
    assert {f"rank{r}.stdout.log" for r in range(4)} <= {
        p.name for d in round_dir.glob("slurm_noderank*") for p in d.iterdir()}, launcher
    assert not (two_cases_run.folder / "executed").exists()  # the shell syntax stayed data
    assert (two_cases_run.shared / "code").is_dir()  # the odd name was used as a name
    # Identical in form to a local run: the same record, key for key.
    assert local_run.wait(300) == 0, local_run.stderr
    (local_doc,) = local_run.docs()
    assert set(doc) == set(local_doc)
    assert set(doc["metrics"]) == set(local_doc["metrics"])
    two_cases_run.assert_nothing_left(slurm_cluster)


def test_repeats_are_separate_jobs(two_cases_run):
    assert two_cases_run.wait(400) == 1, two_cases_run.stderr
    docs = [d for d in two_cases_run.docs() if d["case_name"] == REPEATED]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert [d["round"] for d in docs] == [1, 2]
    assert len({d["environment"]["nodes"][0]["slurm"]["job_id"] for d in docs}) == 2


def test_a_rank_crash_is_a_failed_round_with_the_ranks_lines(two_cases_run):
    assert two_cases_run.wait(400) == 1, two_cases_run.stderr
    (doc,) = [d for d in two_cases_run.docs() if d["case_name"] == CASE]
    assert doc["status"] == "failed"
    assert any("injected failure on rank 1 at step 1" in line for line in doc["error_lines"]), doc["error_lines"]
    assert "node 1" in doc["reason"]


def test_accelbench_own_deadline_cancels_the_job(slurm_cluster, deadline_run):
    assert deadline_run.wait(180) == 1, deadline_run.stderr
    (doc,) = deadline_run.docs()
    assert doc["status"] == "timeout" and "deadline of 10 s passed" in doc["reason"], doc["reason"]
    deadline_run.assert_nothing_left(slurm_cluster)


def test_a_job_past_its_time_limit_is_a_timeout_with_nothing_left_queued(slurm_cluster, time_limit_run):
    # Slurm enforces limits every 30 s: the 1-minute limit ends the hung job 60 to 90 s after it started.
    assert time_limit_run.wait(300) == 1, time_limit_run.stderr
    (doc,) = time_limit_run.docs()
    assert doc["status"] == "timeout", doc["reason"]
    assert "Slurm's time limit (1) passed" in doc["reason"] and "TIMEOUT" in doc["reason"]
    time_limit_run.assert_nothing_left(slurm_cluster)

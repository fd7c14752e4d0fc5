"""What Slurm's commands print on the test cluster of tests/infra/slurm.py (Slurm 22.05.8), copied from it, and
a fake Slurm answering accelbench's commands with it: each submitted job follows a script of states and writes
what its nodes would (node files, the master port its batch script chose, rank logs, exit codes). Read by
tests/test_slurm_scripts.py (parsing) and tests/test_slurm_rounds.py (rounds through the fake)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Callable, Optional

import pytest

from run_benchmarks.execute import rounds
from run_benchmarks.catalog.casename import parse as parse_case_name
from run_benchmarks.backends.schedulers import slurm as slurm_scheduler
from run_benchmarks.backends.schedulers.slurm_client import SlurmClient
from training.contract import perflog

from .conftest import write


def cluster_file(path: Path, shared: Path | str, master_port: Optional[int] = None, **settings) -> Path:
    """A Slurm cluster file: ``settings`` under ``slurm:``; ``master_port`` auto unless given."""
    settings = {"partition": "debug", "shared_dir": str(shared), **settings}
    lines = ["scheduler: slurm", *([f"master_port: {master_port}"] if master_port else []), "slurm:",
             *(f"  {key}: {json.dumps(value)}" for key, value in settings.items())]
    return write(path, "\n".join(lines) + "\n")


# ---------------------------------------------------------------- canned output of the test cluster

SCONTROL = {  # scontrol show job -o <id>, one line per state; the fake puts its own job id in
    "PENDING": (
        "JobId=2 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 Account=(null) QOS=(null) JobState=PENDING "
        "Reason=BeginTime Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
        "RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:36 "
        "EligibleTime=2026-11-25T15:15:36 AccrueTime=Unknown StartTime=2026-11-25T15:15:36 EndTime=Unknown "
        "Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T14:15:36 Scheduler=Main "
        "Partition=debug AllocNode:Sid=localhost:23094 ReqNodeList=(null) ExcNodeList=(null) NodeList= "
        "NumNodes=2-2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=2M,node=2,billing=2 "
        "Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 "
        "Features=(null) DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) "
        "Command=/tmp/scratch/cl4/node.sh 30 WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-2.out "
        "StdIn=/dev/null StdOut=/tmp/scratch/cl4/slurm-2.out Power= "),
    "RUNNING": (
        "JobId=3 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) QOS=(null) JobState=RUNNING "
        "Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:01 "
        "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:37 EligibleTime=2026-11-25T14:15:37 "
        "AccrueTime=2026-11-25T14:15:37 StartTime=2026-11-25T14:15:38 EndTime=Unknown Deadline=N/A "
        "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T14:15:38 Scheduler=Main Partition=debug "
        "AllocNode:Sid=localhost:23094 ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 "
        "NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* "
        "NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
        "DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) "
        "Command=/tmp/scratch/cl4/node.sh 30 WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-3.out "
        "StdIn=/dev/null StdOut=/tmp/scratch/cl4/slurm-3.out Power= "),
    "COMPLETING": (
        "JobId=3 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) QOS=(null) JobState=COMPLETING "
        "Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:01 "
        "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:37 EligibleTime=2026-11-25T14:15:37 "
        "AccrueTime=2026-11-25T14:15:37 StartTime=2026-11-25T14:15:38 EndTime=2026-11-25T14:15:39 Deadline=N/A "
        "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T14:15:38 Scheduler=Main Partition=debug "
        "AllocNode:Sid=localhost:23094 ReqNodeList=(null) ExcNodeList=(null) NodeList=node1 BatchHost=node1 "
        "NumNodes=1 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* "
        "NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
        "DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) "
        "Command=/tmp/scratch/cl4/node.sh 30 WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-3.out "
        "StdIn=/dev/null StdOut=/tmp/scratch/cl4/slurm-3.out Power= "),
    "CANCELLED": (
        "JobId=3 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) QOS=(null) JobState=CANCELLED "
        "Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0 RunTime=00:00:01 "
        "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:37 EligibleTime=2026-11-25T14:15:37 "
        "AccrueTime=2026-11-25T14:15:37 StartTime=2026-11-25T14:15:38 EndTime=2026-11-25T14:15:39 Deadline=N/A "
        "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T14:15:38 Scheduler=Main Partition=debug "
        "AllocNode:Sid=localhost:23094 ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 "
        "NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* "
        "NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
        "DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) "
        "Command=/tmp/scratch/cl4/node.sh 30 WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-3.out "
        "StdIn=/dev/null StdOut=/tmp/scratch/cl4/slurm-3.out Power= "),
    "COMPLETED": (
        "JobId=5 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901755 Nice=0 Account=(null) QOS=(null) JobState=COMPLETED "
        "Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:01 "
        "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:41 EligibleTime=2026-11-25T14:15:41 "
        "AccrueTime=2026-11-25T14:15:41 StartTime=2026-11-25T14:15:41 EndTime=2026-11-25T14:15:42 Deadline=N/A "
        "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T14:15:41 Scheduler=Main Partition=debug "
        "AllocNode:Sid=localhost:23094 ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 "
        "NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* "
        "NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
        "DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) "
        "Command=/tmp/scratch/cl4/node.sh 1 WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-5.out "
        "StdIn=/dev/null StdOut=/tmp/scratch/cl4/slurm-5.out Power= "),
    "FAILED": (
        "JobId=4 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901756 Nice=0 Account=(null) QOS=(null) JobState=FAILED "
        "Reason=NonZeroExitCode Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=1:0 "
        "RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:15:41 "
        "EligibleTime=2026-11-25T14:15:41 AccrueTime=2026-11-25T14:15:41 StartTime=2026-11-25T14:15:41 "
        "EndTime=2026-11-25T14:15:41 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-11-25T14:15:41 Scheduler=Main Partition=debug AllocNode:Sid=localhost:23094 "
        "ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 NumTasks=2"
        " CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* "
        "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
        "OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/scratch/cl4/node.sh x "
        "WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-4.out StdIn=/dev/null "
        "StdOut=/tmp/scratch/cl4/slurm-4.out Power= "),
    "TIMEOUT": (
        "JobId=1 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=TIMEOUT "
        "Reason=TimeLimit Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0 "
        "RunTime=00:01:27 TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-25T14:15:36 "
        "EligibleTime=2026-11-25T14:15:36 AccrueTime=2026-11-25T14:15:36 StartTime=2026-11-25T14:15:38 "
        "EndTime=2026-11-25T14:17:05 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-11-25T14:15:38 Scheduler=Main Partition=debug AllocNode:Sid=localhost:23094 "
        "ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 NumTasks=2"
        " CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* "
        "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
        "OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/scratch/cl4/node.sh 300 "
        "WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-1.out StdIn=/dev/null "
        "StdOut=/tmp/scratch/cl4/slurm-1.out Power= "),
    "NODE_FAIL": (
        "JobId=6 JobName=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 UserId=root(0) "
        "GroupId=root(0) MCS_label=N/A Priority=4294901754 Nice=0 Account=(null) QOS=(null) JobState=NODE_FAIL "
        "Reason=NodeDown Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0 "
        "RunTime=00:00:14 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-25T14:17:06 "
        "EligibleTime=2026-11-25T14:17:06 AccrueTime=2026-11-25T14:17:06 StartTime=2026-11-25T14:17:07 "
        "EndTime=2026-11-25T14:17:21 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-11-25T14:17:07 Scheduler=Main Partition=debug AllocNode:Sid=localhost:23094 "
        "ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 NumTasks=2"
        " CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* "
        "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
        "OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/scratch/cl4/node.sh 300 "
        "WorkDir=/tmp/scratch/cl4 StdErr=/tmp/scratch/cl4/slurm-6.out StdIn=/dev/null "
        "StdOut=/tmp/scratch/cl4/slurm-6.out Power= "),
}

# This cluster has no memory cgroup, so none of its jobs ends OUT_OF_MEMORY: that line is the FAILED one
# with the state, reason and exit code Slurm gives a job the kernel's OOM killer ended.
SCONTROL["OUT_OF_MEMORY"] = SCONTROL["FAILED"].replace(
    "JobState=FAILED Reason=NonZeroExitCode", "JobState=OUT_OF_MEMORY Reason=OutOfMemory").replace(
    "ExitCode=1:0", "ExitCode=0:125")
SCONTROL_UNKNOWN = "slurm_load_jobs error: Invalid job id specified\n"  # stderr, exit 1: a job Slurm forgot
SACCT_DISABLED = "Slurm accounting storage is disabled\n"  # stderr, exit 1: the test cluster keeps no accounting
# With accounting, ``sacct -n -X -P -o State,NodeList,ExitCode,Partition`` prints this shape (sacct's manual;
# the test cluster cannot): a cancelled job's state says by whom.
SACCT_CANCELLED = "CANCELLED by 0|node[1-2]|0:15|debug\n"
# sinfo -h -N -o '%N|%R|%t|%c|%G' (preflight): idle nodes; nodes running other jobs; one drained, one not
# responding (its slurmd frozen).
SINFO_IDLE = "node1|debug|idle|2|(null)\nnode2|debug|idle|2|(null)\n"
SINFO_BUSY = "node1|debug|mix|2|(null)\nnode2|debug|mix|2|(null)\n"
SINFO_UNUSABLE = "node1|debug|drain|2|(null)\nnode2|debug|down*|2|(null)\n"
# sinfo -h -N -n node[1-2] -o '%N %t' (after a NODE_FAIL): which node stopped responding.
NODE_STATES_ONE_DOWN = "node1 idle\nnode2 down*\n"


def _done(argv, stdout: str = "", stderr: str = "", code: int = 0) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(list(argv), code, stdout, stderr)


class CannedClient(SlurmClient):
    """A SlurmClient whose commands print what ``answers`` holds for their name (a callable: per argv)."""

    def __init__(self, **answers):
        super().__init__(None)
        self.answers, self.calls = answers, []

    def run(self, argv, timeout_s=30, env=None):
        self.calls.append(list(argv))
        answer = self.answers[argv[0]]
        return answer(argv) if callable(answer) else answer


class FakeJob:
    """One submitted job. ``steps``: the states ``scontrol`` shows, one per call (the last one for good),
    each with what the job's nodes do once it has been shown: start (their node files), report their
    ranks' steps, exit (their exit codes)."""

    def __init__(self, job_id: str, argv: list[str], env: dict):
        self.job_id, self.argv, self.env = job_id, argv, env
        self.folder = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("--chdir=")))
        self.config = json.loads((self.folder / "config.json").read_text())
        self.name = parse_case_name(self.config["runtime"]["case_name"])
        self.steps: list[tuple[str, tuple]] = []
        self.scancels = 0

    def node_dir(self, rank: int) -> Path:
        return self.folder / f"slurm_noderank{rank}"

    @property
    def upcoming(self) -> str:
        return self.steps[0][0]

    def show(self) -> str:
        state, effects = self.steps[0]
        if len(self.steps) > 1:
            self.steps.pop(0)
        else:
            self.steps[0] = (state, ())
        for effect in effects:
            effect(self)
        return re.sub(r"^JobId=\d+", f"JobId={self.job_id}", SCONTROL[state]) + "\n"

    def cancel(self) -> None:
        """scancel: a pending job goes, a running one is signalled (its node scripts write 143); one that is
        already ending (COMPLETING or ended) is not changed."""
        self.scancels += 1
        if self.upcoming == "PENDING":
            self.steps = [("CANCELLED", ())]
        elif self.upcoming == "RUNNING":
            self.steps = [("COMPLETING", (exits(*[143] * self.name.nnodes),)), ("CANCELLED", ())]


CHOSEN_PORT = 23456  # what the batch script of a master_port auto job chose on its first node, in the fake


def started(job: FakeJob) -> None:
    """The batch script's master port (master_port auto), then each node script's first line: its node, the
    node's address, the job."""
    if "ACCELBENCH_MASTER_PORT" in (job.folder / "job.sbatch").read_text():
        write(job.node_dir(0) / "master_port", f"{CHOSEN_PORT}\n")
    for rank in range(job.name.nnodes):
        write(job.node_dir(rank) / "slurm_node.txt", f"node{rank + 1} 127.0.0.{rank + 2} {job.job_id}\n")


def exits(*codes: Optional[int]) -> Callable[[FakeJob], None]:
    """Node r's launcher exits with codes[r] (None: no exit file, as from a node that froze)."""
    def effect(job: FakeJob) -> None:
        for rank, code in enumerate(codes):
            if code is not None:
                write(job.node_dir(rank) / "exit_code", f"{code}\n")
    return effect


def reported(job: FakeJob) -> None:
    """Every rank reports every step in the real record format, where torchrun's --log-dir puts it."""
    workload = job.config["workload"]
    train, n = workload["train"], job.name.nprocs_per_node
    tokens = train["micro_batch_size"] * workload["model"]["seq_len"]
    for node in range(job.name.nnodes):
        for local in range(n):
            rank = node * n + local
            records = [perflog.StartRecord(rank=rank, local_rank=local, node_rank=node, world_size=job.name.world_size,
                                           framework="torch", framework_version="2.13.0", device="cpu",
                                           precision="fp32", n_params=1000, flops_per_token=6000.0,
                                           flop_formula="6N", tokens_per_step=tokens)]
            records += [perflog.StepRecord(rank=rank, step=s, warmup=s < train["warmup_steps"], step_time_s=0.1,
                                           tokens=tokens, loss=6.0) for s in range(train["steps"])]
            records.append(perflog.EndRecord(rank=rank, steps=train["steps"], peak_memory_bytes=2**27,
                                             memory_total_bytes=2**34, memory_kind="rss"))
            folder = job.node_dir(node) / "torchrun" / "fake_0" / "attempt_0" / str(local)
            write(folder / "stdout.log", "".join(perflog.format_record(r) + "\n" for r in records))
            write(folder / "stderr.log", "")


# What a job does, as the states scontrol shows it pass through (see FakeJob).
def completes(job):
    return [("PENDING", ()), ("RUNNING", (started, reported, exits(0, 0))), ("COMPLETING", ()), ("COMPLETED", ())]


def hangs(job):
    return [("PENDING", ()), ("RUNNING", (started,))]


def pends(job):
    return [("PENDING", ())]


class FakeGuard:
    def __init__(self, tag: str, cleanup=()):
        self.tag, self.cleanup, self.closed = tag, list(cleanup), None

    def close(self, disarm: bool = False) -> None:
        self.closed = "disarmed" if disarm else "armed: its scancel runs"


class FakeSlurm(SlurmClient):
    """accelbench's Slurm commands answered with the test cluster's canned output; each sbatch makes a
    ``FakeJob`` following ``script(job)``."""

    def __init__(self, script: Callable[[FakeJob], list] = completes, sinfo: str = SINFO_IDLE,
                 node_states: str = "node1 idle\nnode2 idle\n"):
        super().__init__(None)
        self.script, self.sinfo, self.node_states_text = script, sinfo, node_states
        self.calls: list[list[str]] = []
        self.jobs: dict[str, FakeJob] = {}
        self.guards: list[FakeGuard] = []

    def guard(self, tag: str, cleanup=()) -> FakeGuard:
        self.guards.append(FakeGuard(tag, cleanup))
        return self.guards[-1]

    def run(self, argv, timeout_s=30, env=None):
        argv = list(argv)
        self.calls.append(argv)
        if argv[0] == "sinfo":
            return _done(argv, self.node_states_text if "-n" in argv else self.sinfo)
        if argv[0] == "sbatch":
            job = FakeJob(str(100 + len(self.jobs)), argv, env or {})
            job.steps = self.script(job)
            self.jobs[job.job_id] = job
            return _done(argv, f"{job.job_id}\n")
        if argv[0] == "scontrol":
            job = self.jobs.get(argv[-1])
            return _done(argv, job.show()) if job else _done(argv, "", SCONTROL_UNKNOWN, 1)
        if argv[0] == "sacct":
            return _done(argv, "", SACCT_DISABLED, 1)
        if argv[0] == "scancel":
            self.jobs[argv[-1]].cancel()
            return _done(argv)
        raise AssertionError(f"accelbench ran {argv}, which Slurm's fake does not answer")


@pytest.fixture
def fake_slurm(monkeypatch):
    """Install a FakeSlurm (``fake_slurm(script, sinfo=..., node_states=...)``) as the client and guard
    every Slurm scheduler of this process makes; rounds are watched every 20 ms."""
    def install(script=completes, **canned) -> FakeSlurm:
        fake = FakeSlurm(script, **canned)
        monkeypatch.setattr(slurm_scheduler, "SlurmClient", lambda conf=None: fake)
        monkeypatch.setattr(slurm_scheduler, "LocalGuard", fake.guard)
        monkeypatch.setattr(rounds, "POLL_S", 0.02)
        return fake
    return install


def fake_cluster(tmp_path: Path, **settings) -> Path:
    """A cluster file for a fake run; every NodeJob poll asks scontrol (poll_s 0.01) unless settings say."""
    return cluster_file(tmp_path / "slurm.yaml", tmp_path / "shared", **{"poll_s": 0.01, "poll_max_s": 0.01,
                                                                          **settings})

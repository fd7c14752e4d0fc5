"""The Slurm scheduler without Slurm, as torchx tests its own: the text accelbench submits, the parsing of
what Slurm's commands print, and how a job's states become a round's status, all in this process.

The sbatch argv, batch script and node script are compared whole against the expected text. The output of
``scontrol show job -o``, ``sinfo`` and ``sacct`` below was copied from the test cluster of
tests/infra/slurm.py (Slurm 22.05.8); ``FakeSlurm`` answers accelbench's commands with it, each submitted
job following a script of states, and writes what a job's nodes would (exit codes, node files, rank logs).
What needs a real Slurm (a 2x2 job, a rank crash, Ctrl-C, a killed orchestrator, a time limit, a deadline)
is in tests/test_slurm.py.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional

import pytest

from run_benchmarks.execute import rounds
from run_benchmarks.catalog.casename import parse as parse_case_name
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts.guard import orchestrator_tag
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.backends.schedulers import slurm as slurm_scheduler
from run_benchmarks.backends.schedulers.slurm import Slurm, describe_end
from run_benchmarks.backends.schedulers.slurm_client import JobInfo, SlurmClient
from training.contract import perflog

from .conftest import ROOT, write

CASE = "gpt2_tiny:torch:cpu:2:1"
RUN_ID = "20250101-000000-abcd"

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


# ---------------------------------------------------------------- the job as accelbench writes it


def cluster_file(path: Path, shared: Path | str, **settings) -> Path:
    settings = {"partition": "debug", "shared_dir": str(shared), **settings}
    lines = ["scheduler: slurm", "slurm:", *(f"  {key}: {json.dumps(value)}" for key, value in settings.items())]
    return write(path, "\n".join(lines) + "\n")


ODD_SHARED = "/shared/bench's dir $(touch /tmp/accelbench-owned)"  # never created: only planned


def submitted_text(tmp_path: Path, case_name: str, **settings) -> str:
    """What a dry run prints for the case's first round (``Slurm.dry_run``: the sbatch argv as one shell
    line, job.sbatch and node.sh), planned in this process with a fixed run id and master port; the parts
    that belong to this machine (its interpreter, the code's digest, this process) are named."""
    inputs = load_inputs(ROOT, None, cluster_file(tmp_path / "slurm.yaml", ODD_SHARED, **settings))
    plan = build_run_plan(inputs, [case_name], RUN_ID, tmp_path / "logs", ports=[29500])
    text = "\n".join(Slurm.dry_run(plan, plan.cases[0])) + "\n"
    text = re.sub(r"/code/[0-9a-f]{16}", "/code/DIGEST", text)
    return text.replace(sys.executable, "PYTHON").replace(orchestrator_tag(), "ORCHESTRATOR")


EXPECTED_2X1 = r"""$ sbatch --parsable --job-name=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x1-r1 --nodes=2 --ntasks-per-node=1 --partition=debug --time=01:00:00 --no-requeue '--chdir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1' '--output=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm-%j.out' --exclusive '--comment=x; touch m $(id) `id`' '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/job.sbatch'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/job.sbatch
#!/bin/bash
# accelbench: gpt2_tiny:torch:cpu:2:1 round 1; written by accelbench, every value from the plan quoted
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
master_addr=$(address_of "$first")
export ACCELBENCH_MASTER_ADDR="${master_addr:-$first}"
exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 /bin/bash '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/node.sh'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/node.sh
#!/bin/bash
# One task per node: the launcher of the node SLURM_NODEID names, its exit code kept beside its logs.
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
master_addr=$ACCELBENCH_MASTER_ADDR
node_addr=$(address_of "$SLURMD_NODENAME")
node_addr=${node_addr:-$(hostname)}
monitor=()
case "$SLURM_NODEID" in
  0)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0'
    export ACCELBENCH_NODE_RANK=0
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --node-rank=0 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank0/monitor')
    ;;
  1)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1'
    export ACCELBENCH_NODE_RANK=1
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --node-rank=1 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1/slurm_noderank1/monitor')
    ;;
  *) echo "accelbench: the plan has no node $SLURM_NODEID" >&2; exit 2 ;;
esac
mkdir -p "$dir/tmp"
printf '%s %s %s\n' "$SLURMD_NODENAME" "$node_addr" "$SLURM_JOB_ID" > "$dir/slurm_node.txt"
mon=""
if [ ${#monitor[@]} -gt 0 ]; then "${monitor[@]}" > "$dir/monitor.log" 2>&1 & mon=$!; fi
"${launcher[@]}" > "$dir/launcher.log" 2>&1 &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "$code" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
if [ -n "$mon" ]; then kill -TERM "$mon" 2>/dev/null; wait "$mon"; fi
exit "$code"
"""

EXPECTED_2X2 = r"""$ sbatch --parsable --job-name=accelbench-20250101-000000-abcd-gpt2_tiny-torch-cpu-2x2-r1 --nodes=2 --ntasks-per-node=1 --partition=debug --time=30 --no-requeue '--chdir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1' '--output=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm-%j.out' --account=bench --qos=high --gres=gpu:2 '--constraint=a100&ib' '--exclude=n[3-4]' '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/job.sbatch'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/job.sbatch
#!/bin/bash
# accelbench: gpt2_tiny:torch:cpu:2:2 round 1; written by accelbench, every value from the plan quoted
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
master_addr=$(address_of "$first")
export ACCELBENCH_MASTER_ADDR="${master_addr:-$first}"
exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 /bin/bash '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/node.sh'
--- /shared/bench's dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/node.sh
#!/bin/bash
# One task per node: the launcher of the node SLURM_NODEID names, its exit code kept beside its logs.
set -u
address_of() { scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
master_addr=$ACCELBENCH_MASTER_ADDR
node_addr=$(address_of "$SLURMD_NODENAME")
node_addr=${node_addr:-$(hostname)}
monitor=()
case "$SLURM_NODEID" in
  0)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0'
    export ACCELBENCH_NODE_RANK=0
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=0 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank0/monitor')
    ;;
  1)
    dir='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1'
    export ACCELBENCH_NODE_RANK=1
    export ACCELBENCH_ORCHESTRATOR=ORCHESTRATOR
    export ACCELBENCH_RUN_ID=20250101-000000-abcd
    export PYTHONPATH='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/code/DIGEST'
    export PYTHONUNBUFFERED=1
    export TMPDIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/tmp'
    export TORCHINDUCTOR_CACHE_DIR='/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/cache/torchinductor'
    launcher=(PYTHON -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=1 --master-addr="$master_addr" --master-port=29500 --local-addr="$node_addr" --max-restarts=0 --monitor-interval=0.25 '--log-dir=/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/torchrun' --redirects=3 -m training.run_pretraining --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json')
    monitor=(PYTHON -m training.monitor --config '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/config.json' --interval 1 --out '/shared/bench'"'"'s dir $(touch /tmp/accelbench-owned)/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x2/round1/slurm_noderank1/monitor')
    ;;
  *) echo "accelbench: the plan has no node $SLURM_NODEID" >&2; exit 2 ;;
esac
mkdir -p "$dir/tmp"
printf '%s %s %s\n' "$SLURMD_NODENAME" "$node_addr" "$SLURM_JOB_ID" > "$dir/slurm_node.txt"
mon=""
if [ ${#monitor[@]} -gt 0 ]; then "${monitor[@]}" > "$dir/monitor.log" 2>&1 & mon=$!; fi
"${launcher[@]}" > "$dir/launcher.log" 2>&1 &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "$code" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
if [ -n "$mon" ]; then kill -TERM "$mon" 2>/dev/null; wait "$mon"; fi
exit "$code"
"""


def test_a_2x1_job_is_submitted_as_this_text(tmp_path):
    """Defaults (whole nodes, an hour), and an sbatch option with shell syntax: one argument, quoted."""
    text = submitted_text(tmp_path, CASE, sbatch_options=["--comment=x; touch m $(id) `id`"])
    assert text == EXPECTED_2X1


def test_a_2x2_job_with_the_site_options_is_submitted_as_this_text(tmp_path):
    """Account, QOS, GRES, a time limit, shared nodes, options of the site's; two ranks per node."""
    text = submitted_text(tmp_path, "gpt2_tiny:torch:cpu:2:2", account="bench", qos="high", gres="gpu:2",
                          time_limit="30", exclusive=False, sbatch_options=["--constraint=a100&ib", "--exclude=n[3-4]"])
    assert text == EXPECTED_2X2


def test_dry_run_prints_the_job_with_every_value_quoted(accelbench, tmp_path):
    shared = tmp_path / "shared dir $(id)"
    cluster = cluster_file(tmp_path / "slurm.yaml", shared, account="bench", gres="gpu:2")
    result = accelbench("run", CASE, "--dry-run", "--cluster", cluster)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ sbatch --parsable" in out and "--partition=debug" in out and "--account=bench" in out
    assert "--gres=gpu:2" in out and "--no-requeue" in out
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in out
    assert f"'{shared}/runs/" in out  # quoted as one word
    assert '--master-addr="$master_addr"' in out and '--local-addr="$node_addr"' in out
    assert not shared.exists()  # a dry run writes nothing


def test_a_case_name_with_shell_syntax_never_reaches_a_shell(accelbench, tmp_path):
    marker = tmp_path / "executed"
    cluster = cluster_file(tmp_path / "slurm.yaml", tmp_path / "shared")
    result = accelbench("run", f"gpt2_tiny:torch:cpu:2:1;touch {marker}", "--cluster", cluster)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert not marker.exists() and not (tmp_path / "shared").exists()


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


# ---------------------------------------------------------------- what Slurm's commands print, parsed


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


@pytest.mark.parametrize("state, nodes, reason, exit_code, active", [
    ("PENDING", "", "BeginTime", "0:0", True),
    ("RUNNING", "node[1-2]", "None", "0:0", True),
    ("COMPLETING", "node1", "None", "0:0", True),  # after scancel, while node1 still cleans up
    ("CANCELLED", "node[1-2]", "None", "143:0", False),
    ("COMPLETED", "node[1-2]", "None", "0:0", False),
    ("FAILED", "node[1-2]", "NonZeroExitCode", "1:0", False),
    ("TIMEOUT", "node[1-2]", "TimeLimit", "143:0", False),
    ("NODE_FAIL", "node[1-2]", "NodeDown", "143:0", False),
    ("OUT_OF_MEMORY", "node[1-2]", "OutOfMemory", "0:125", False),
])
def test_scontrol_lines_become_job_infos(state, nodes, reason, exit_code, active):
    client = CannedClient(scontrol=lambda argv: _done(argv, re.sub(r"^JobId=\d+", f"JobId={argv[-1]}",
                                                                   SCONTROL[state]) + "\n"))
    info = client.job("42")
    assert info == JobInfo("42", state, nodes, reason, exit_code, "debug")
    assert info.active is active
    assert client.calls == [["scontrol", "show", "job", "-o", "42"]]


def test_a_job_slurm_has_forgotten_is_read_from_sacct_or_is_gone():
    forgotten = _done([], "", SCONTROL_UNKNOWN, 1)
    client = CannedClient(scontrol=forgotten, sacct=_done([], SACCT_CANCELLED))
    assert client.job("7") == JobInfo("7", "CANCELLED", "node[1-2]", "", "0:15", "debug")
    assert client.calls[-1] == ["sacct", "-n", "-X", "-P", "-j", "7", "-o", "State,NodeList,ExitCode,Partition"]
    assert CannedClient(scontrol=forgotten, sacct=_done([], "", SACCT_DISABLED, 1)).job("7") is None

    def hangs(argv):  # sacct on a site without accounting may hang: its short timeout ends the wait
        raise subprocess.TimeoutExpired(argv, 10)
    assert CannedClient(scontrol=forgotten, sacct=hangs).job("7") is None


def test_sinfo_lines_become_nodes_and_their_states():
    nodes = CannedClient(sinfo=_done([], SINFO_BUSY + SINFO_UNUSABLE.replace("node", "gpu"))).nodes()
    assert [(n.name, n.partition, n.state, n.cpus, n.gres, n.usable) for n in nodes] == [
        ("node1", "debug", "mix", 2, "(null)", True), ("node2", "debug", "mix", 2, "(null)", True),
        ("gpu1", "debug", "drain", 2, "(null)", False), ("gpu2", "debug", "down*", 2, "(null)", False)]
    client = CannedClient(sinfo=_done([], NODE_STATES_ONE_DOWN))
    assert client.node_states("node[1-2]") == {"node1": "idle", "node2": "down*"}
    assert client.calls == [["sinfo", "-h", "-N", "-n", "node[1-2]", "-o", "%N %t"]]
    assert client.node_states("") == {}  # a job that never ran: no command
    failing = CannedClient(sinfo=_done([], "", "sinfo: error: Unable to contact slurm controller\n", 1))
    with pytest.raises(PreflightError, match="sinfo failed .exit 1.: sinfo: error: Unable to contact"):
        failing.nodes()


def test_sbatch_parsable_output_is_the_job_id():
    assert CannedClient(sbatch=_done([], "12\n")).submit(["sbatch"], {}) == "12"
    assert CannedClient(sbatch=_done([], "13;accelbench\n")).submit(["sbatch"], {}) == "13"  # federated
    refused = CannedClient(sbatch=_done([], "", "sbatch: error: invalid partition specified: gpu\n", 1))
    with pytest.raises(RuntimeError, match="sbatch refused the job .exit 1.: sbatch: error: invalid partition"):
        refused.submit(["sbatch"], {})


def test_slurm_states_become_statuses():
    """Why a node ended, in Slurm's words, for the states that say more than the launcher's exit code; the
    ones this machine's Slurm cannot produce on demand (no memory cgroup here for OUT_OF_MEMORY) too."""
    from run_benchmarks.execute.outcome import is_out_of_memory

    oom = describe_end("7", JobInfo("7", "OUT_OF_MEMORY", "n[1-2]"), 137, {})
    assert oom == "Slurm job 7 ended OUT_OF_MEMORY (out of memory)"
    assert is_out_of_memory(oom)  # classify reads endings: status oom
    lost = describe_end("7", JobInfo("7", "NODE_FAIL", "n[1-2]"), None, {"n1": "alloc", "n2": "down*"})
    assert lost == "Slurm job 7 ended NODE_FAIL (node n2 stopped responding)"
    unknown = describe_end("7", JobInfo("7", "NODE_FAIL", "n[1-2]"), None, {})
    assert unknown == "Slurm job 7 ended NODE_FAIL (node n[1-2] stopped responding)"
    assert describe_end("7", JobInfo("7", "COMPLETED"), 0, {}) is None
    assert describe_end("7", JobInfo("7", "FAILED"), 1, {}) == "Slurm job 7 ended FAILED; its launcher exited with 1"
    assert describe_end("7", JobInfo("7", "FAILED"), 0, {}) is None  # this node's launcher ended well
    assert describe_end("7", JobInfo("7", "TIMEOUT"), None, {}) == "Slurm job 7 ended TIMEOUT"


# ---------------------------------------------------------------- rounds through a fake Slurm


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


def started(job: FakeJob) -> None:
    """Each node script's first line: its node, the node's address, the job."""
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

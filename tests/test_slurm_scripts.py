"""The Slurm scheduler without Slurm, as torchx tests its own: the text accelbench submits and the parsing of
what Slurm's commands print, in this process.

The sbatch argv, batch script and node script are compared whole against the expected text
(tests/slurm_expected.py). The output of ``scontrol show job -o``, ``sinfo`` and ``sacct`` was copied from the
test cluster of tests/infra/slurm.py (Slurm 22.05.8): tests/slurm_canned.py. How a job's states become a
round's status, through a fake Slurm answering with that output: tests/test_slurm_rounds.py. What needs a
real Slurm (a 2x2 job, a rank crash, Ctrl-C, a killed orchestrator, a time limit, a deadline) is in
tests/test_slurm.py.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts.guard import orchestrator_tag
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.backends.schedulers.slurm import Slurm, describe_end
from run_benchmarks.backends.schedulers.slurm_client import JobInfo

from .conftest import ROOT, write
from .slurm_canned import (NODE_STATES_ONE_DOWN, SACCT_CANCELLED, SACCT_DISABLED, SCONTROL, SCONTROL_UNKNOWN,
                           SINFO_BUSY, SINFO_UNUSABLE, CannedClient, _done, cluster_file)
from .slurm_expected import EXPECTED_2X1, EXPECTED_2X2

CASE = "gpt2_tiny:torch:cpu:2:1"
RUN_ID = "20250101-000000-abcd"

# ---------------------------------------------------------------- the job as accelbench writes it


ODD_SHARED = "/shared/bench's dir $(touch /tmp/accelbench-owned)"  # never created: only planned


def submitted_text(tmp_path: Path, case_name: str, **settings) -> str:
    """What a dry run prints for the case's first round (``Slurm.dry_run``: the sbatch argv as one shell
    line, job.sbatch and node.sh), planned in this process with a fixed run id; the parts
    that belong to this machine (its interpreter, the code's digest, this process) are named."""
    inputs = load_inputs(ROOT, None, cluster_file(tmp_path / "slurm.yaml", ODD_SHARED, **settings))
    plan = build_run_plan(inputs, [case_name], RUN_ID, tmp_path / "logs")
    text = "\n".join(Slurm.dry_run(plan, plan.cases[0])) + "\n"
    text = re.sub(r"/code/[0-9a-f]{16}", "/code/DIGEST", text)
    return text.replace(sys.executable, "PYTHON").replace(orchestrator_tag(), "ORCHESTRATOR")


def test_a_2x1_job_is_submitted_as_this_text(tmp_path):
    """Defaults (whole nodes, an hour, master_port auto: chosen by the batch script on the job's first node),
    and an sbatch option with shell syntax: one argument, quoted."""
    text = submitted_text(tmp_path, CASE, sbatch_options=["--comment=x; touch m $(id) `id`"])
    assert text == EXPECTED_2X1


def test_a_2x2_job_with_the_site_options_is_submitted_as_this_text(tmp_path):
    """Account, QOS, GRES, a time limit, shared nodes, options of the site's; two ranks per node; the cluster
    file's master port (nothing chosen in the job)."""
    text = submitted_text(tmp_path, "gpt2_tiny:torch:cpu:2:2", master_port=29500, account="bench", qos="high",
                          gres="gpu:2", time_limit="30", exclusive=False,
                          sbatch_options=["--constraint=a100&ib", "--exclude=n[3-4]"])
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


@pytest.mark.parametrize("container, chooser", [
    ({"kind": "apptainer", "image": "/img/torch $(id).sif", "options": ["--nv"]},
     "master_port=$(apptainer exec --bind '/shared/bench'\"'\"'s dir $(touch /tmp/accelbench-owned):"
     "/shared/bench'\"'\"'s dir $(touch /tmp/accelbench-owned)' --nv '/img/torch $(id).sif' PYTHON "),
    ({"kind": "pyxis", "image": "reg.example/torch:2.13"},
     "master_port=$(srun --nodes=1 --ntasks=1 --container-image=reg.example/torch:2.13 '--container-mounts=/shared/"
     "bench'\"'\"'s dir $(touch /tmp/accelbench-owned):/shared/bench'\"'\"'s dir $(touch /tmp/accelbench-owned)' "
     "--nodelist=\"$first\" PYTHON "),
], ids=["apptainer", "pyxis"])
def test_the_batch_script_chooses_the_port_where_the_launchers_run(tmp_path, container, chooser):
    """In the site's container, as node 0's launcher runs: Apptainer around ports.py, or a one-task Pyxis step
    pinned to the job's first node (the batch script itself runs outside the container); every value quoted."""
    text = submitted_text(tmp_path, CASE, container=container)
    (line,) = [line for line in text.splitlines() if line.startswith("master_port=$(")]
    assert line.startswith(chooser), line
    assert line.endswith("/code/DIGEST/training/contract/ports.py')"), line

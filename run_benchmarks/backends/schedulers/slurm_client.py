"""Slurm's own client commands, run as argv lists: ``sbatch``, ``scontrol``, ``squeue``, ``scancel``, ``sinfo``.

A job is followed with ``scontrol show job`` (works without accounting, until ``MinJobAge`` after the
end) and, once it is gone from there, ``sacct`` with a short timeout (it hangs on sites without
accounting). States are Slurm's names, e.g. RUNNING, COMPLETED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Optional, Sequence

from run_benchmarks.errors import PreflightError

ACTIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING", "REQUEUED",
                 "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD"}
UNUSABLE_NODE_STATES = ("down", "drain", "drng", "fail", "maint", "inval", "unk", "npc", "futr", "powered_down")


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str
    nodes: str = ""
    reason: str = ""
    exit_code: str = ""
    partition: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


@dataclass(frozen=True)
class NodeInfo:
    name: str
    partition: str
    state: str
    cpus: int
    gres: str

    @property
    def usable(self) -> bool:
        state = self.state.rstrip("*~#!%$@^-+")
        return not self.state.endswith("*") and not state.startswith(UNUSABLE_NODE_STATES)


class SlurmClient:
    def __init__(self, conf: Optional[str] = None):
        self.env = {**os.environ, **({"SLURM_CONF": conf} if conf else {})}

    def run(self, argv: Sequence[str], timeout_s: float = 30, env: Optional[dict] = None
            ) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(list(argv), env=env or self.env, capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise PreflightError(f"{argv[0]} is not on this machine's PATH: accelbench submits to Slurm with its "
                                 "own commands", "run accelbench on a login node of the cluster, or install "
                                 "Slurm's client tools (Debian: apt-get install slurm-client)") from None

    def submit(self, argv: Sequence[str], env: dict) -> str:
        done = self.run(argv, timeout_s=60, env={**self.env, **env})
        if done.returncode:
            raise RuntimeError(f"sbatch refused the job (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        return done.stdout.strip().split(";")[0]  # --parsable: "<id>[;<cluster>]"

    def job(self, job_id: str) -> Optional[JobInfo]:
        """The job as Slurm sees it now, or None once no command knows it any more."""
        done = self.run(["scontrol", "show", "job", "-o", job_id], timeout_s=20)
        if done.returncode == 0 and done.stdout.strip():
            fields = _key_values(done.stdout)
            return JobInfo(job_id, fields.get("JobState", "UNKNOWN"), fields.get("NodeList", ""),
                           fields.get("Reason", ""), fields.get("ExitCode", ""), fields.get("Partition", ""))
        try:
            done = self.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,NodeList,ExitCode,Partition"],
                            timeout_s=10)
        except (subprocess.TimeoutExpired, PreflightError):
            return None
        line = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""
        if not line:
            return None
        state, nodes, code, partition = (line.split("|") + ["", "", "", ""])[:4]
        return JobInfo(job_id, state.split()[0], nodes, "", code, partition)

    def cancel(self, job_id: str) -> None:
        self.run(["scancel", job_id], timeout_s=30)

    def nodes(self) -> list[NodeInfo]:
        done = self.run(["sinfo", "-h", "-N", "-o", "%N|%R|%t|%c|%G"], timeout_s=30)
        if done.returncode:
            raise PreflightError(f"sinfo failed (exit {done.returncode}): {done.stderr.strip()[-300:]}",
                                 "check that slurmctld answers from this machine (scontrol ping), and slurm.conf "
                                 "(slurm.conf in the cluster file, or SLURM_CONF)")
        found = []
        for line in done.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 5:
                cpus = int(parts[3]) if parts[3].isdigit() else 0
                found.append(NodeInfo(parts[0], parts[1], parts[2], cpus, parts[4]))
        return found

    def node_states(self, nodelist: str) -> dict[str, str]:
        if not nodelist:
            return {}
        done = self.run(["sinfo", "-h", "-N", "-n", nodelist, "-o", "%N %t"], timeout_s=20)
        return dict(line.split(None, 1) for line in done.stdout.splitlines() if len(line.split()) == 2)


def _key_values(text: str) -> dict[str, str]:
    """``scontrol -o`` output: ``Key=Value`` tokens on one line (values here have no spaces we need)."""
    out = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key not in out:
            out[key] = value
    return out

"""``scheduler: slurm``: one ``sbatch`` job per round on a partition, followed with Slurm's own tools.

Code, configs and logs go to the cluster's shared directory, which this machine sees at the same path;
a round's logs are copied into the run folder afterwards and analysed like any other. The job's states
become accelbench's: COMPLETED -> what the perf records say; FAILED -> failed with the failing rank's
lines; OUT_OF_MEMORY -> oom; TIMEOUT (Slurm's limit) and accelbench's own deadline -> timeout; NODE_FAIL
-> failed naming the node; CANCELLED from outside -> interrupted. Ctrl-C, a signal or this process's
death cancels the job (``scancel``; a parent-death guard does it when the orchestrator is killed).
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from run_benchmarks.catalog.config_files import HostSpec, SlurmSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.hosts.guard import ENV_TAG
from run_benchmarks.backends.hosts.local import LocalGuard
from run_benchmarks.backends.schedulers.base import Scheduler, check_writable, clear_port_file
from run_benchmarks.backends.schedulers.shared_copy import copy_node_folder, copy_regular_file
from run_benchmarks.backends.schedulers.slurm_client import JobInfo, SlurmClient
from run_benchmarks.backends.schedulers.slurm_script import (EXIT_FILE, MASTER_ADDR, NODE_ADDR, NODE_FILE, batch_script, node_script, sbatch_argv)
from run_benchmarks.backends.schedulers.slurm_script import round_folder, write_round_files

if TYPE_CHECKING:
    from run_benchmarks.results.rounds.result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan, RunPlan

GONE_GRACE_S = 60.0  # after scancel: how long the job may take to leave the running states
ENDING_STATES = ("COMPLETING", "STAGE_OUT")  # Slurm is ending the job: its processes are being signalled


class Slurm(Scheduler):
    name = "slurm"
    shared_folder = True
    checks_hosts = False  # this machine stands for the nodes only as the shared directory's viewer

    @classmethod
    def master_address(cls, hosts: Sequence[HostSpec]) -> str:
        return MASTER_ADDR

    @classmethod
    def node_address(cls, host: HostSpec) -> str:
        return NODE_ADDR

    @classmethod
    def port_chooser(cls, rnd: "RoundPlan") -> str:
        return "chosen by the batch script on the job's first node when the job starts"

    @classmethod
    def dry_run(cls, plan: "RunPlan", case: "CasePlan") -> list[str]:
        spec, rnd = plan.cluster.slurm, case.rounds[0]
        folder = round_folder(rnd)
        import shlex
        return [f"$ {shlex.join(sbatch_argv(spec, case, rnd, folder / 'job.sbatch'))}",
                f"--- {folder / 'job.sbatch'}", *batch_script(spec, case, rnd, folder / "node.sh").splitlines(),
                f"--- {folder / 'node.sh'}", *node_script(spec, rnd).splitlines()]

    def __init__(self, plan: "RunPlan", hosts, runtimes):
        super().__init__(plan, hosts, runtimes)
        self.spec: SlurmSpec = plan.cluster.slurm
        self.client = SlurmClient(self.spec.conf)
        self.current: Optional[RoundJob] = None

    # ------------------------------------------------------------ preflight

    def preflight(self) -> None:
        nodes = self.client.nodes()
        partitions = sorted({n.partition.rstrip("*") for n in nodes})
        mine = [n for n in nodes if n.partition.rstrip("*") == self.spec.partition]
        if not mine:
            raise PreflightError(f"Slurm has no partition {self.spec.partition!r} (slurm.partition of the cluster "
                                 "file)", f"use one of: {', '.join(partitions) or '(sinfo lists none)'}")
        usable = [n for n in mine if n.usable]
        wanted = max(case.name.nnodes for case in self.plan.cases)
        if len(usable) < wanted:
            raise PreflightError(f"partition {self.spec.partition}: {len(usable)} usable node(s) of {len(mine)} "
                                 f"({', '.join(f'{n.name} {n.state}' for n in mine)}); a case asks for {wanted}",
                                 "lower nnodes in the case name, or wait for nodes to return")
        if (self.spec.gpus_per_node or self.spec.gres) and not any("gpu" in n.gres for n in usable):
            raise PreflightError(f"partition {self.spec.partition}: no node declares GPUs (sinfo %G: "
                                 f"{', '.join(sorted({n.gres for n in usable}))})",
                                 "remove gpus_per_node/gres from the cluster file, or choose a GPU partition")
        self._check_shared_dir()

    def _check_shared_dir(self) -> None:
        check_writable(Path(self.spec.shared_dir), "slurm.shared_dir", "choose a folder that this machine and "
                       "every node mount at the same path, writable by you")

    # ------------------------------------------------------------ a round

    def start_round(self, case: "CasePlan", rnd: "RoundPlan", result: "RoundResult",
                    jobs: dict[int, Job], monitors: dict[int, Job]) -> None:
        self.close()  # the previous round's job: ended; its guard goes
        clear_port_file(rnd)
        argv, _ = write_round_files(self.spec, case, rnd)
        tag = f"slurm-{uuid.uuid4().hex}"
        from run_benchmarks import signals
        with signals.deferred():  # a submitted job is in ``jobs`` before a signal can act
            job_id = self.client.submit(argv, env={ENV_TAG: tag})
            self.current = RoundJob(self.client, job_id, self.spec, tag)
            for node in rnd.nodes:
                jobs[node.node_rank] = NodeJob(self.current, Path(node.remote_dir))

    def live_dir(self, node: "NodePlan") -> Path:
        return Path(node.remote_dir)

    def conclude(self, ending: str, result: "RoundResult") -> str:
        job = self.current
        info = job.settle() if job is not None else None
        if job is None or info is None:
            return ending
        if info.state in ("TIMEOUT", "DEADLINE") and ending != "interrupted":
            result.reason = f"Slurm's time limit ({self.spec.time_limit}) passed: job {job.job_id} {info.state}"
            return "timeout"
        if info.state in ("CANCELLED", "PREEMPTED") and not job.cancelled_by_us and ending != "interrupted":
            result.reason = (f"job {job.job_id} was {'preempted' if info.state == 'PREEMPTED' else 'cancelled'} "
                             "outside accelbench (scancel or the site's policy)")
            return "cancelled"
        return ending

    def node_facts(self, node: "NodePlan") -> dict:
        job = self.current
        facts = {"scheduler": "slurm", "partition": self.spec.partition}
        if job is not None:
            info = job.final() or job.info
            facts.update(job_id=job.job_id, nodelist=info.nodes if info else None)
        try:
            name, address, _ = (Path(node.remote_dir) / NODE_FILE).read_text(encoding="utf-8").split()
            facts.update(node=name, address=address)
        except (OSError, ValueError):
            facts.update(node=None, address=None)
        return {"host": facts["node"] or "slurm", "slurm": facts}  # the node Slurm placed it on

    def fetch_logs(self, node: "NodePlan") -> None:
        copy_node_folder(Path(node.remote_dir), node.log_dir)  # regular files only, capped
        for name in ("job.sbatch", "node.sh"):
            copy_regular_file(Path(node.remote_dir).parent / name, node.log_dir.parent / name)
        for output in Path(node.remote_dir).parent.glob("slurm-*.out"):
            copy_regular_file(output, node.log_dir.parent / output.name)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


class RoundJob:
    """The one Slurm job of a round, as its nodes' views share it: polled with backoff, cancelled once."""

    def __init__(self, client: SlurmClient, job_id: str, spec: SlurmSpec, tag: str,
                 clock: Callable[[], float] = time.monotonic):
        self.client, self.job_id, self.spec, self.clock = client, job_id, spec, clock
        self.info: Optional[JobInfo] = None
        self.gone = False  # no command knows the job any more
        self.cancelled_by_us = False
        self._next_poll, self._interval = 0.0, spec.poll_s
        # This process's death (even SIGKILL) cancels the job: the guard runs scancel when its pipe ends.
        conf = [f"SLURM_CONF={spec.conf}"] if spec.conf else []
        self.guard = LocalGuard(tag, cleanup=["env", *conf, "scancel", job_id])

    def poll(self, force: bool = False) -> Optional[JobInfo]:
        now = self.clock()
        if (force or now >= self._next_poll) and not self.ended:
            info = self.client.job(self.job_id)
            if info is None:
                self.gone = True
            else:
                self.info = info
            self._next_poll = now + self._interval
            self._interval = min(self._interval * 1.5, self.spec.poll_max_s)
        return self.info

    @property
    def ended(self) -> bool:
        return self.gone or (self.info is not None and not self.info.active)

    def final(self) -> Optional[JobInfo]:
        return self.info if self.ended else None

    def settle(self, wait_s: float = GONE_GRACE_S) -> Optional[JobInfo]:
        """Once the nodes are done: wait for Slurm to end the job too (a node's exit file comes before the
        job's state), cancelling it if it will not end; its final state, or None if no command knows it."""
        deadline = self.clock() + wait_s
        self.poll(force=True)
        while not self.ended and self.clock() < deadline:
            time.sleep(0.2)
            self.poll(force=True)
        if not self.ended:
            self.cancel(0)
        return self.final()

    def cancel(self, grace_s: float) -> None:
        # The job's state now, not the last one polled: a node's exit code can come before the poll that
        # would show the job COMPLETING. A job Slurm is already ending (an outside scancel, its time limit,
        # a node's failure) is left to end: scancel would change nothing but make the ending look like ours.
        self.poll(force=True)
        if not self.ended and (self.info is None or self.info.state not in ENDING_STATES):
            self.cancelled_by_us = True
            self.client.cancel(self.job_id)
        deadline = self.clock() + grace_s + GONE_GRACE_S
        while not self.ended and self.clock() < deadline:
            time.sleep(0.2)
            self.poll(force=True)

    def close(self) -> None:
        if not self.ended:
            self.cancel(0)
        self.guard.close(disarm=self.ended)


class NodeJob(Job):
    """One node of a round's Slurm job: its exit code is the file its node script writes; until then the
    job's state says whether it can still come."""

    def __init__(self, job: RoundJob, folder: Path):
        self.job, self.folder = job, folder

    def _exit_code(self) -> Optional[int]:
        try:
            return int((self.folder / EXIT_FILE).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def poll(self) -> Optional[int]:
        code = self._exit_code()
        if code is not None:
            return code
        self.job.poll()
        if not self.job.ended:
            return None
        return self._exit_code() if self._exit_code() is not None else 1  # ended without its launcher's code

    def stop(self, grace_s: float = 10.0) -> None:
        self.job.cancel(grace_s)

    def ending(self) -> Optional[str]:
        info = self.job.settle()
        if info is None:
            return None
        down = self.job.client.node_states(info.nodes) if info.state == "NODE_FAIL" else {}
        return describe_end(self.job.job_id, info, self._exit_code(), down)


def describe_end(job_id: str, info: JobInfo, exit_code: Optional[int], node_states: dict[str, str]) -> Optional[str]:
    """Why a node ended, in Slurm's words, where its exit code alone would mislead (None: it says enough)."""
    if info.state == "COMPLETED":
        return None
    state = {"OUT_OF_MEMORY": "OUT_OF_MEMORY (out of memory)"}.get(info.state, info.state)
    why = f"Slurm job {job_id} ended {state}"
    if info.state == "NODE_FAIL":
        down = [name for name, s in node_states.items() if s.endswith("*") or s.startswith(("down", "fail"))]
        return why + f" (node {', '.join(down) if down else info.nodes} stopped responding)"
    if exit_code is not None and info.state not in ("OUT_OF_MEMORY",):
        return None if exit_code == 0 else f"{why}; its launcher exited with {exit_code}"
    return why

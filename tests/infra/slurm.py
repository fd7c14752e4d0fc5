"""A real Slurm cluster on this machine for the tests: Debian's munged, slurmctld and one slurmd per node.

Every daemon's files (key, sockets, pids, state, spool, logs) live under one private folder, so the
cluster shares nothing with a system Slurm and leaves nothing behind. The nodes are ``slurmd -N nodeK``
processes on distinct ports whose ``NodeAddr`` are distinct loopback addresses (127.0.0.2, .3, ...), so
a job's master address and each node's local address differ as they would on a real cluster.

``slurm_cluster`` is the session fixture (registered in tests/conftest.py): the daemons start once, when a
test first asks for them, and stop at the end of the session. Every wait here is on an event (a socket, a
state in ``sinfo``/``squeue``) with a bound, never a fixed sleep.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")


def missing_tools() -> list[str]:
    return [tool for tool in DAEMONS if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]


def _free_ports(count: int) -> list[int]:
    """Distinct ports outside the kernel's ephemeral range (training/contract/ports.py): bind(0)'s lie where every
    outgoing connection draws its own, and the other lanes' could take one before the daemons listen."""
    from training.contract import ports

    return ports.free_ports(count)


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class SlurmCluster:
    root: Path
    nodes: int = 2
    partition: str = "debug"
    slurmd_timeout_s: int = 6
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, accelbench) needs to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def node_name(self, index: int) -> str:
        return f"node{index + 1}"

    def node_addr(self, index: int) -> str:
        return f"127.0.0.{index + 2}"

    def start(self) -> "SlurmCluster":
        for sub in ("state", "spool", "log", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = self.root / "munge" / "munge.socket"
        self._spawn("munged", [_tool("munged"), "-F", "-f", f"--socket={self.munge_socket}", f"--key-file={key}",
                               f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                               f"--log-file={self.root / 'log' / 'munged.log'}",
                               f"--seed-file={self.root / 'munge' / 'munged.seed'}"])
        self._wait_for(lambda: self.munge_socket.exists(), "munged's socket")
        ctld_port, *node_ports = _free_ports(1 + self.nodes)
        self.conf.write_text(self._conf_text(ctld_port, node_ports), encoding="utf-8")
        env = {**os.environ, **self.env}
        self._spawn("slurmctld", [_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)], env)
        for index in range(self.nodes):
            name = self.node_name(index)
            self._spawn(name, [_tool("slurmd"), "-D", "-N", name, "-f", str(self.conf)], env)
        self._wait_for(self._all_idle, "every node idle in sinfo", timeout_s=30)
        return self

    def _conf_text(self, ctld_port: int, node_ports: list[int]) -> str:
        r = self.root
        lines = [
            "ClusterName=accelbench", f"SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={ctld_port}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n", f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'spool'}/slurmd.%n.pid", f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log'}/slurmd.%n.log", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none", "MailProg=/bin/true",
            "ReturnToService=2", "SchedulerType=sched/backfill", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "MinJobAge=600", "KillWait=3", "JobRequeue=0",
            f"SlurmdTimeout={self.slurmd_timeout_s}", "InactiveLimit=0", "SlurmdParameters=config_overrides",
            "OverTimeLimit=0", "MessageTimeout=5",
        ]
        cpus = os.cpu_count() or 1
        for index, port in enumerate(node_ports):
            lines.append(f"NodeName={self.node_name(index)} NodeAddr={self.node_addr(index)} NodeHostname=localhost "
                         f"Port={port} CPUs={cpus} State=UNKNOWN")
        nodes = ",".join(self.node_name(i) for i in range(self.nodes))
        lines.append(f"PartitionName={self.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP "
                     "OverSubscribe=FORCE:4")
        return "\n".join(lines) + "\n"

    def _spawn(self, name: str, argv: list[str], env: Optional[dict] = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                start_new_session=True)
        log.close()

    def _wait_for(self, ready, what: str, timeout_s: float = 15) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}: "
                                       + self.logs_tail())
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"no {what} after {timeout_s:g} s: " + self.logs_tail())

    def _all_idle(self) -> bool:
        out = self.client(["sinfo", "-h", "-N", "-o", "%N %t"])
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return len(states) == self.nodes and all(s == "idle" for s in states.values())

    def client(self, argv: list[str], timeout_s: float = 20) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout_s)

    def queue(self) -> list[str]:
        """Every job Slurm still knows as queued, running or completing: ``"<id> <STATE>"`` lines."""
        out = self.client(["squeue", "-h", "-o", "%i %T"])
        return [line for line in out.stdout.splitlines() if line.strip()]

    def jobs_under(self, folder: Path) -> dict[str, str]:
        """The queue's jobs (id -> state) whose working directory is inside ``folder``: a run's jobs, told
        apart from other runs' by the run's own shared directory (accelbench submits with --chdir there)."""
        out = self.client(["squeue", "-h", "-o", "%i|%T|%Z"])
        found = {}
        for line in out.stdout.splitlines():
            job, _, rest = line.partition("|")
            state, _, workdir = rest.partition("|")
            if workdir == str(folder) or workdir.startswith(f"{folder}/"):
                found[job] = state
        return found

    def logs_tail(self) -> str:
        texts = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace").strip().splitlines()[-5:]
            texts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(texts)

    def stop(self) -> None:
        """Cancel what is queued, then end every daemon; processes the jobs left die with their session."""
        try:
            self.client(["scancel", "--full", "--partition", self.partition], timeout_s=10)
        except (OSError, subprocess.SubprocessError):
            pass
        for name, proc in reversed(list(self.processes.items())):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in self.processes.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self._sweep_daemonized()

    def _sweep_daemonized(self) -> None:
        """Step daemons leave their slurmd's session (and a job's tasks, whose sbatch named this cluster's
        slurm.conf): whatever still carries this cluster's conf in its environment goes too. The raw
        /proc/PID/environ is read: slurmstepd rewrites its environment in a way psutil's parser stops at."""
        needle = f"SLURM_CONF={self.conf}".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if int(pid) != os.getpid() and needle in f.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def wait_until(ready: Callable[[], object], what: str, timeout_s: float, every_s: float = 0.2,
               detail: Optional[Callable[[], object]] = None):
    """Poll ``ready`` until it returns something true (returned), failing after ``timeout_s`` with ``what``
    (and ``detail()``, what there is instead)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = ready()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout_s:g} s" + (f": {detail()}" if detail else ""))
        time.sleep(every_s)


def processes_mentioning(marker: Path) -> list[str]:
    """Processes whose command line mentions ``marker`` (a run's shared directory): the nodes are this
    machine, so a worker left behind on a node is a process here."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(marker) in part for part in proc.info["cmdline"] or ()):
                found.append(" ".join(proc.info["cmdline"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> SlurmCluster:
    """The test Slurm (munged, slurmctld, two slurmd), started once for the whole session when a test first
    asks for it and stopped at the session's end. Tests tell their jobs apart by their own shared
    directories (``SlurmCluster.jobs_under``), so none needs the queue to itself."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"no Slurm here: {', '.join(missing)} missing (./dev test installs slurmctld, slurmd, munge)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=2)
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.stop()
        pytest.fail(f"the test Slurm did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()

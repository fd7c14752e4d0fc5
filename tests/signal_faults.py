"""Fault injection helpers: an orchestrator in a subprocess, signalled mid-round, and a scan for what of
its run is still alive (processes on this machine, containers on an engine). Used by tests/test_signals.py
and benchmarks/cleanup.py."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import psutil

from .runner import ends_with_the_test

ROOT = Path(__file__).resolve().parent.parent
LONG = ("--set", "train.steps=100000", "--set", "train.warmup_steps=1")


@dataclass
class Orchestrator:
    process: subprocess.Popen
    log_root: Path
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def run_id(self) -> Optional[str]:
        runs = [p.name for p in self.log_root.iterdir() if p.is_dir() and p.name != "cache"] \
            if self.log_root.is_dir() else []
        return runs[0] if len(runs) == 1 else None

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)


def start(workdir: Path, case: str, *args: str, log_root: Optional[Path] = None) -> Orchestrator:
    """``accelbench run CASE ARGS`` in a subprocess of its own session (as a user's shell would start it)."""
    log_root = log_root or workdir / "logs"
    out, err = workdir / "orchestrator.out", workdir / "orchestrator.err"
    tmp = workdir / "system-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", case, "--log-root", str(log_root), *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    with open(out, "wb") as o, open(err, "wb") as e:
        process = subprocess.Popen(argv, cwd=workdir, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=ends_with_the_test())
    return Orchestrator(process, log_root, out, err)


def wait_for_step(orch: Orchestrator, folders: Sequence[Path], timeout: float = 300) -> None:
    """Until a rank's log under one of ``folders`` holds a step record (the round is training)."""
    def stepped() -> bool:
        for log in (log for folder in folders for log in folder.glob("**/attempt_0/*/stdout.log")):
            try:
                if '"kind":"step"' in log.read_text(errors="replace"):
                    return True
            except OSError:
                pass
        return False

    _poll(orch, stepped, "training", f"no step within {timeout:g} s", timeout)


def wait_for_workers(orch: Orchestrator, folders: Sequence[Path], count: int, timeout: float = 300) -> None:
    """Until ``count`` workers under ``folders`` have their log (torchrun opens it as it starts the worker): the
    whole tree is up, for a signal whose test needs no step (SIGKILL), before the workers spend their start-up."""
    _poll(orch, lambda: sum(len(list(folder.glob("**/attempt_0/*/stdout.log"))) for folder in folders) >= count,
          "its workers started", f"fewer than {count} workers within {timeout:g} s", timeout)


def until_said(orch: Orchestrator, text: str, timeout_s: float = 60) -> None:
    """Until the orchestrator's stderr holds ``text`` (a signal's line: it was handled), or it ended (the test's
    own assertions then say what it did). A signal sent before the last was handled would be pending beside it:
    the same signal counts once, and two are handled lowest number first (SIGINT before SIGTERM)."""
    deadline = time.monotonic() + timeout_s
    while text not in orch.stderr() and orch.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def _poll(orch: Orchestrator, ready, before: str, late: str, timeout: float) -> None:
    """Every 0.2 s until ``ready()``; the run ending first, or ``timeout``, fails the test with its stderr."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if orch.process.poll() is not None:
            raise AssertionError(f"the run ended before {before} (exit {orch.process.returncode}):\n"
                                 f"{orch.stderr()[-3000:]}")
        time.sleep(0.2)
    orch.process.kill()
    raise AssertionError(f"{late}:\n{orch.stderr()[-3000:]}")


def run_processes(orchestrator_pid: int, markers: Sequence[Path | str] = ()) -> list[str]:
    """Processes of that orchestrator's run on this machine: marked as its in their environment (launchers,
    workers, monitors, guards; also inside containers), or naming one of ``markers`` (its folders)."""
    owner = f"{socket.gethostname()}:{orchestrator_pid}:"
    marks = [str(m) for m in markers]
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid in (os.getpid(), orchestrator_pid):
            continue
        try:
            cmd = " ".join(proc.info["cmdline"] or ())
            mine = any(m in cmd for m in marks) or proc.environ().get("ACCELBENCH_ORCHESTRATOR", "").startswith(owner)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
        if mine:
            found.append(f"{proc.pid} {cmd[:160]}")
    return found


def run_containers(docker_host: str, run_id: Optional[str]) -> list[str]:
    import docker

    client = docker.DockerClient(base_url=docker_host, timeout=60)
    try:
        # The low-level list: one call, no per-container inspect that races a removal.
        found = [(c["Names"][0].lstrip("/"), c["State"]) for c in
                 client.api.containers(all=True, filters={"label": "accelbench"})]
        return [f"{name} ({state})" for name, state in found if run_id and run_id in name]
    finally:
        client.close()


def seconds_until_gone(check, timeout: float) -> tuple[float, list[str]]:
    """Poll ``check()`` (what is left) until it is empty: (seconds it took, what was left at the end)."""
    began = time.monotonic()
    left = check()
    while left and time.monotonic() - began < timeout:
        time.sleep(0.1)
        left = check()
    return time.monotonic() - began, left


def kill_and_measure(orch: Orchestrator, sig: int, check, timeout: float) -> tuple[float, list[str]]:
    """Send ``sig`` to the orchestrator; seconds until ``check()`` finds nothing (the orchestrator's own
    exit included, for a handled signal)."""
    began = time.monotonic()
    os.kill(orch.pid, sig)
    if sig != signal.SIGKILL:
        orch.wait(timeout=120)
    else:
        orch.wait(timeout=10)
    _, left = seconds_until_gone(check, max(0.0, timeout - (time.monotonic() - began)) + 0.01)
    return time.monotonic() - began, left


def dead_orchestrator() -> str:
    """The ``host:pid:start`` of a process that has ended (an orchestrator that was killed)."""
    from run_benchmarks.backends.hosts.guard import _start_ticks

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    ticks = _start_ticks(process.pid)
    process.wait()
    return f"{socket.gethostname()}:{process.pid}:{ticks}"

"""This machine, reached with subprocesses: the embedded default."""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Sequence

from run_benchmarks import signals
from run_benchmarks.backends.hosts import reaper
from run_benchmarks.catalog.addresses import is_this_machine
from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.backends.hosts.base import VERSION_PROBE, CommandResult, Host, Job
from run_benchmarks.backends.hosts.guard import (DEATH_GRACE_S, DISARM, ENV_ORCHESTRATOR, ENV_TAG, guard_argv, orchestrator_tag)


class LocalGuard:
    """The reaper of one job: a process in its own session whose stdin is a pipe only we hold. When this
    process dies (however), the pipe ends and the reaper kills every process carrying the job's tag
    (and runs ``cleanup``); ``close`` ends it after a normal stop, ``disarm`` without the sweep."""

    def __init__(self, tag: str, cleanup: Sequence[str] = ()):
        env = {**{k: v for k, v in os.environ.items() if k != ENV_TAG}, ENV_ORCHESTRATOR: orchestrator_tag()}
        self.process = subprocess.Popen(guard_argv(sys.executable, tag, DEATH_GRACE_S, cleanup), env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    def release(self, disarm: bool = False) -> None:
        """Let it go (its sweep finds what is left of the job), without waiting."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.closed:
            try:
                if disarm:
                    stdin.write(DISARM)
                    stdin.flush()
                stdin.close()
            except OSError:
                pass

    def close(self, disarm: bool = False, timeout_s: float = DEATH_GRACE_S + 7) -> None:
        self.release(disarm)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


class LocalJob(Job):
    def __init__(self, process: subprocess.Popen, tag: str = "", guard: Optional[LocalGuard] = None):
        self.process, self.tag, self.guard = process, tag, guard

    def poll(self) -> Optional[int]:
        code = self.process.poll()
        if code is not None and self.guard is not None:
            self.guard.release()  # its sweep ends workers a dead launcher left behind
        return code

    def stop(self, grace_s: float = 10.0) -> None:
        # Launchers start workers in sessions of their own and a worker whose launcher died is re-parented, so
        # neither a group nor a tree reaches them all: every process with the job's tag does (the reaper, as
        # over SSH and in the guard).
        reaper.stop_here(self.tag, 0.0 if signals.hurried() else grace_s)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.close()

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()


class LocalHost(Host):
    def __init__(self, spec: HostSpec):
        super().__init__(spec)
        # The address is node 0's rendezvous address for every launcher: a local host's must be this
        # machine's, as --hosts takes only this machine's loopback names for a local node.
        if spec.address not in ("127.0.0.1", "localhost", "::1") and not is_this_machine(spec.address):
            raise PreflightError(f"host {spec.name}: address {spec.address!r} is not an address of this machine, "
                                 "yet its backend is local (its nodes run here, and the launchers meet at that "
                                 "address)", "give this machine's address on the nodes' network (127.0.0.1 when "
                                             "every node is local), or backend: ssh for another machine")

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, output: Path) -> Job:
        output.parent.mkdir(parents=True, exist_ok=True)
        tag = f"accelbench-{uuid.uuid4().hex}"
        guard = LocalGuard(tag)  # first: nothing of the job may start before its reaper
        try:
            with open(output, "ab") as sink:
                process = subprocess.Popen(
                    list(argv), env={**os.environ, **env, ENV_TAG: tag}, cwd=cwd, stdout=sink,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C reaches us, not the workers
                )
        except BaseException:
            guard.close(disarm=True)
            raise
        return LocalJob(process, tag, guard)

    def start_guard(self, cleanup: Sequence[str]) -> LocalGuard:
        """A reaper that runs ``cleanup`` (e.g. ``docker rm -f NAME``) if this process dies first."""
        return LocalGuard(f"accelbench-guard-{uuid.uuid4().hex}", cleanup)

    def run(self, argv: Sequence[str], timeout_s: float = 60.0) -> CommandResult:
        # In a session of its own: a Ctrl-C at the terminal (the whole process group) reaches the orchestrator,
        # which stops the run, and never half-runs a short command (a port chosen, a version read) into a
        # "could not start" that would be recorded instead of the interruption.
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, start_new_session=True)
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def distribution_version(self, python: str, distributions: Sequence[str]) -> Optional[str]:
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            for distribution in distributions:  # our own interpreter: no process needed
                try:
                    return importlib.metadata.version(distribution)
                except importlib.metadata.PackageNotFoundError:
                    pass
            return None
        result = self.run([python, "-c", VERSION_PROBE, *distributions])
        return result.stdout.strip() or None

    def put(self, local: Path, remote: Path) -> None:
        if Path(local).resolve() != Path(remote).resolve():
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(local, remote)

    def get(self, remote: Path, local: Path) -> None:
        self.put(remote, local)

    def makedirs(self, remote: Path | PurePosixPath) -> None:
        Path(remote).mkdir(parents=True, exist_ok=True)

    def exists(self, remote: Path | PurePosixPath) -> bool:
        return Path(remote).exists()

    def write_text(self, remote: Path | PurePosixPath, text: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        Path(remote).write_text(text, encoding="utf-8")

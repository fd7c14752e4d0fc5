"""This machine, reached with subprocesses: the embedded default."""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Sequence

import psutil

from .base import VERSION_PROBE, CommandResult, Host, Job


class LocalJob(Job):
    def __init__(self, process: subprocess.Popen):
        self.process = process

    def poll(self) -> Optional[int]:
        return self.process.poll()

    def stop(self, grace_s: float = 10.0) -> None:
        # Launchers start workers in sessions of their own, so signal the whole tree, not a group.
        try:
            root = psutil.Process(self.process.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for proc in tree:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(tree, timeout=grace_s)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class LocalHost(Host):
    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, output: Path) -> Job:
        output.parent.mkdir(parents=True, exist_ok=True)
        with open(output, "ab") as sink:
            process = subprocess.Popen(
                list(argv), env={**os.environ, **env}, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,  # Ctrl-C reaches us, not the workers
            )
        return LocalJob(process)

    def run(self, argv: Sequence[str], timeout_s: float = 60.0) -> CommandResult:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
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

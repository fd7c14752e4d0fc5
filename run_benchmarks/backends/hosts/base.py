"""The host interface every backend implements."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Sequence

from run_benchmarks.catalog.config_files import HostSpec


# Prints the installed version of the distribution named in argv[1] (nothing if absent), for any Python 3.8+.
VERSION_PROBE = (
    "import importlib.metadata as m, sys\n"
    "for d in sys.argv[1:]:\n"
    "    try: print(m.version(d)); break\n"
    "    except m.PackageNotFoundError: pass\n"
)


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


class Job(ABC):
    """A long-running command on a host (a node's launcher)."""

    @abstractmethod
    def poll(self) -> Optional[int]:
        """The exit code, or None while it runs."""

    @abstractmethod
    def stop(self, grace_s: float = 10.0) -> None:
        """Ask it and every process it started to end; force them after ``grace_s``."""

    def close(self) -> None:
        """After it ended (stopped or by itself): let go of what watched it (its parent-death guard)."""

    def ending(self) -> Optional[str]:
        """Why it ended, where its exit code alone would mislead (a lost connection), else None."""
        return None


class Host(ABC):
    def __init__(self, spec: HostSpec):
        self.spec = spec
        self._closers: list = []

    def on_close(self, callback) -> None:
        """Run ``callback`` when the host is closed (e.g. a Docker bridge over its connection)."""
        self._closers.append(callback)

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, output: Path) -> Job:
        """Start ``argv`` (never a shell string) with ``env`` added; stdout and stderr go to ``output``."""

    def start_guard(self, cleanup: Sequence[str]):
        """A watcher on the host that runs ``cleanup`` when this orchestrator dies or loses the host;
        ``close(disarm=True)`` once the orchestrator cleaned up itself. None where a backend has none."""
        return None

    @abstractmethod
    def run(self, argv: Sequence[str], timeout_s: float = 60.0) -> CommandResult:
        """Run a short command to completion."""

    @abstractmethod
    def distribution_version(self, python: str, distributions: Sequence[str]) -> Optional[str]:
        """The installed version of the first of these Python distributions for ``python`` here, or None."""

    @abstractmethod
    def put(self, local: Path, remote: Path) -> None:
        """Copy a local file to the host, its folders made as needed."""

    @abstractmethod
    def get(self, remote: Path, local: Path) -> None:
        """Copy a file, or a folder with everything under it, from the host."""

    # Staging: what code sync and a round's inputs need on the host before a node starts.

    @abstractmethod
    def makedirs(self, remote: Path | PurePosixPath) -> None:
        """Make the folder and its missing parents; one that exists already is fine."""

    @abstractmethod
    def exists(self, remote: Path | PurePosixPath) -> bool:
        ...

    @abstractmethod
    def write_text(self, remote: Path | PurePosixPath, text: str) -> None:
        """Write ``text`` to a file on the host, its folders made as needed."""

    def free_bytes(self, path: str) -> Optional[int]:
        """Free space of the file system holding ``path`` (its nearest existing parent), or None if unknown."""
        for candidate in [path, *map(str, PurePosixPath(path).parents)]:
            result = self.run(["df", "-Pk", candidate])
            lines = result.stdout.strip().splitlines()
            if result.returncode == 0 and len(lines) >= 2:
                return int(lines[-1].split()[3]) * 1024
        return None

    def device_count(self) -> Optional[int]:
        """NVIDIA GPUs on the host (``nvidia-smi -L``), or None where there is no nvidia-smi."""
        try:
            result = self.run(["nvidia-smi", "-L"])
        except OSError:
            return None
        if result.returncode:
            return None
        return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))

    def close(self) -> None:
        for callback in reversed(self._closers):
            callback()
        self._closers.clear()

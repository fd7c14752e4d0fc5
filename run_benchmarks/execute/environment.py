"""The orchestrator's side of the environment: which accelbench made the numbers."""
from __future__ import annotations

import platform
import socket
import subprocess
import sys
from pathlib import Path

from run_benchmarks import __version__


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def orchestrator_environment(root: Path) -> dict:
    commit = _git(root, "rev-parse", "HEAD")
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no")) if commit else None
    return {
        "accelbench_version": __version__,
        "accelbench_commit": commit or "unknown (not a git checkout)",
        "accelbench_dirty": dirty,
        "orchestrator_host": socket.gethostname(),
        "orchestrator_python": platform.python_version(),
        "argv": sys.argv,
    }

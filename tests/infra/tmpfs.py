"""A small tmpfs mounted for one test (a disk that is nearly full, or fills): needs root or CAP_SYS_ADMIN."""
from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """``size`` as mount takes it (``64m``); unmounted after, lazily if something still holds it."""
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)

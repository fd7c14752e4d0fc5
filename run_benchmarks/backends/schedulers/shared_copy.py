"""A node's folder on the shared volume copied into the run folder, for Slurm and Kubernetes alike.

What the job wrote there is untrusted: a symlink to ~/.ssh/id_rsa or a FIFO/device such as /dev/zero must
not be read by this machine. So only regular files and folders are copied, links never followed nor copied,
and the total is counted first against ``limits.NODE_LOG_BYTES`` (an OSError past it: the round's warning).
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from run_benchmarks import limits


def _skipped(folder: str, names: list[str]) -> set[str]:
    """copytree's ignore: every entry that is not a real folder or a regular file (lstat: links count as links)."""
    kept = set()
    for name in names:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            kept.add(name)
    return set(names) - kept


def _size(root: Path) -> int:
    total = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def copy_node_folder(source: Path, target: Path) -> None:
    """Regular files and folders of ``source`` into ``target``; raise OSError (nothing copied) past the cap."""
    if not stat.S_ISDIR(os.lstat(source).st_mode):
        raise OSError(f"{source} is not a folder (a link, or replaced by the job): nothing copied")
    cap = limits.NODE_LOG_BYTES.value()
    size = _size(source)
    if size > cap:
        raise OSError(f"{source} holds {size:,} bytes, over the cap of {cap:,} (nothing copied; raise it with "
                      f"{limits.NODE_LOG_BYTES.env}=<bytes> if it is meant)")
    shutil.copytree(source, target, symlinks=True, ignore=_skipped, dirs_exist_ok=True)


def copy_regular_file(source: Path, target: Path) -> bool:
    """``source`` to ``target`` when it is a regular file within the cap (a link or device is skipped)."""
    try:
        info = os.lstat(source)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size > limits.NODE_LOG_BYTES.value():
        return False
    shutil.copy2(source, target, follow_symlinks=False)
    return True

"""A Paddle worker process's start: its CPU threads set before paddle is imported (its OpenMP runtime reads the
variable once), then its entry."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from training.contract.spec import WorkerConfig
from training.sysinfo import start_environment


def start(cfg: WorkerConfig, load: Callable[[], Callable[[WorkerConfig], None]]) -> None:
    set_cpu_threads(cfg)
    load()(cfg)


def set_cpu_threads(cfg: WorkerConfig) -> None:
    """Paddle's launcher pins OMP_NUM_THREADS to 1 on import where it was unset, so a worker sees 1 whether the
    user chose it or not. The user's choice wins, as torchrun's ranks keep it: read from the environment the
    launcher was started with (``launcher_setting``). Otherwise, on a CPU, each rank gets its share of the
    cores, which is what torchrun's default amounts to here (all cores for one process, 1 each when ranks fill
    them)."""
    if not cfg.runtime.device.is_cpu:
        return
    chosen = launcher_setting("OMP_NUM_THREADS")
    if chosen is not None and chosen.isdigit() and int(chosen) > 0:
        os.environ["OMP_NUM_THREADS"] = chosen
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ranks_here = int(os.environ.get("PADDLE_LOCAL_SIZE", 1))
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // ranks_here))


def launcher_setting(name: str, proc: Path = Path("/proc")) -> Optional[str]:
    """``name`` in the environment this worker's parent (Paddle's launcher) was started with, before its import
    of paddle changed it. None where it was unset there, or where that environment cannot be read (no /proc)."""
    environ = start_environment(os.getppid(), proc)
    value = environ.get(name.encode()) if environ is not None else None
    return value.decode(errors="replace") if value is not None else None

"""A Paddle worker process's start: its CPU threads set before paddle is imported (its OpenMP runtime reads the
variable once), then its entry."""
from __future__ import annotations

import os
from typing import Callable

from training.contract.spec import WorkerConfig


def start(cfg: WorkerConfig, load: Callable[[], Callable[[WorkerConfig], None]]) -> None:
    set_cpu_threads(cfg)
    load()(cfg)


def set_cpu_threads(cfg: WorkerConfig) -> None:
    """Paddle's launcher pins OMP_NUM_THREADS to 1 on import. On a CPU give each rank its share of the cores,
    which is what torchrun's default amounts to here (all cores for one process, 1 each when ranks fill them)."""
    if not cfg.runtime.device.is_cpu:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ranks_here = int(os.environ.get("PADDLE_LOCAL_SIZE", 1))
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // ranks_here))

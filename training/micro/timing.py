"""The timed loop of every micro-benchmark: warm-up untimed, device synchronised before each clock read.
Framework-free: the framework's ``synchronize`` is passed in."""
from __future__ import annotations

import time
from typing import Callable


def average_seconds(fn: Callable[[], object], warmup: int, iters: int, sync: Callable[[], None]) -> float:
    """Mean wall time of one call of ``fn`` over ``iters`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    sync()
    started = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - started) / iters

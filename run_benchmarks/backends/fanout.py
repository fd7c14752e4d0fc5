"""One thread per host (per item) for host operations, which wait on the network, not the CPU: a command
fanned out to every host of a run (not the training's parallel layouts, which live in the plan)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable


def fan_out(fn: Callable, items: list) -> tuple[list, list[Exception]]:
    """``fn`` over ``items`` on one thread each: the results in order (None where it raised), and the
    exceptions raised."""
    if not items:
        return [], []
    results: list = [None] * len(items)
    errors: list[Exception] = []
    with ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in futures:
            try:
                results[futures[future]] = future.result()
            except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises the first
                errors.append(exc)
    return results, errors

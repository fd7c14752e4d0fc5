"""Fault injection (``debug:`` in a case): the orchestrator's failure paths, exercised on real workers.

Framework-neutral; each worker passes the allocation that makes a real
out-of-memory error on its device.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable

from training.contract.spec import DebugSpec

OOM_REQUEST_BYTES = 2**50  # 1 PiB: more than any device or host has


class InjectedFailure(RuntimeError):
    """Raised by ``debug.fail_at_step``: the orchestrator's crash path, exercised for real."""


def check_faults(debug: DebugSpec, rank: int, step: int, allocate: Callable[[int], object]) -> None:
    if debug.fail_rank != rank:
        return
    if debug.fail_at_step == step:
        raise InjectedFailure(f"injected failure on rank {rank} at step {step} (debug.fail_at_step)")
    if debug.hang_at_step == step:
        while True:
            time.sleep(60)
    if debug.oom_at_step == step:
        allocate(OOM_REQUEST_BYTES)


def exit_after_end(debug: DebugSpec, rank: int) -> None:
    """``debug.exit_code_after_end``: leave at once (no framework teardown), as a worker that crashes at exit
    after reporting everything does; the orchestrator must keep the round ok and warn."""
    if debug.exit_code_after_end is not None and debug.fail_rank == rank:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(debug.exit_code_after_end)


def sleep_ms(ms) -> None:
    """An injected cost (``debug.*_delay_ms``); nothing when unset."""
    if ms:
        time.sleep(ms / 1000)


def compute_delay(debug: DebugSpec, rank: int) -> None:
    """``debug.compute_delay_ms``: on ``fail_rank`` only, before each step's forward and backward (a straggler);
    spinning on the CPU with ``debug.compute_delay_spins``, as a slow kernel would."""
    if debug.fail_rank != rank or not debug.compute_delay_ms:
        return
    if debug.compute_delay_spins:
        until = time.perf_counter() + debug.compute_delay_ms / 1000
        while time.perf_counter() < until:
            pass
    else:
        sleep_ms(debug.compute_delay_ms)

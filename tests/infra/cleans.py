"""``accelbench clean`` ends every dead run's process on this machine, whichever lane's test made it.

A test whose dead run's worker (an orphan) must live until it has asserted the next run's warning holds the
cleans off (``cleans_held``); every other test that cleans waits its turn (``clean_turn``). One lock file
for the machine: the lanes are separate pytest processes.
"""
from __future__ import annotations

import fcntl
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK = Path(tempfile.gettempdir()) / "accelbench-tests-cleans.lock"
WAIT_S = 600  # the holder is one short run and its test


@contextmanager
def cleans_held() -> Iterator[None]:
    """No other test's clean runs inside this block (the lock, exclusive)."""
    with open(LOCK, "a") as lock:
        _acquire(lock)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


clean_turn = cleans_held  # a clean waits for a holder, and holds the others off while it ends what it finds


def _acquire(lock) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{LOCK} held for over {WAIT_S} s: a test holding the cleans off never ended")
            time.sleep(0.2)

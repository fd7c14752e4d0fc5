"""The store's faults told apart (a lock held elsewhere, a full disk, a server out of reach, a dead orchestrator):
pure, no connection. ``StoreError`` is what either engine's driver error becomes at the store's edge, so that
nothing outside results/store/ imports sqlite3 or psycopg to catch it."""
from __future__ import annotations

import errno
import os
import socket
import sqlite3
from pathlib import Path
from typing import Optional

import psutil

from run_benchmarks.errors import UserError


class StoreUnavailable(UserError):
    """A write the store could not take within its time budget: another process holds the lock."""

    reason = ""  # the cause in a few words, for a line that names the store already


class StoreCorrupt(UserError):
    """The file fails the integrity check: nothing is started on it."""


class StoreError(Exception):
    """A database error of either engine, told apart by ``kind``: ``locked`` (another writer holds the store),
    ``full`` (no space), ``unreachable`` (a server that does not answer, or dropped the connection),
    ``login`` (the server refused the login), ``damaged``, ``newer`` (a store of a newer accelbench) or
    ``other``. The driver's own error is its ``__cause__``."""

    def __init__(self, message: str, kind: str = "other"):
        super().__init__(message)
        self.kind = kind
        self.reason = ""  # as StoreUnavailable's: the cause in a few words, for a line that names the store



def is_locked(exc: BaseException) -> bool:
    if isinstance(exc, StoreError):
        return exc.kind == "locked"
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def is_full(exc: BaseException) -> bool:
    if isinstance(exc, StoreError):
        return exc.kind == "full"
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_FULL) or "disk is full" in str(exc)


def locked_fix(path: Path, env: str) -> str:
    return (f"let the other process finish or end it (`fuser -v {path}` names it; an open `sqlite3` shell inside "
            f"BEGIN ... counts), then run again; or point --db at another file; ${env} sets how long to wait")


def orchestrator_identity() -> tuple[str, int, float]:
    """(host, pid, start time) of this process, to tell later whether it is still alive."""
    return socket.gethostname(), os.getpid(), psutil.Process().create_time()


def process_alive(pid: Optional[int], started: Optional[float]) -> bool:
    """Whether process ``pid`` on this host is the one that started at ``started`` and has not ended."""
    if pid is None:
        return True  # unknown: assume alive, never finalize what cannot be checked
    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - float(started)) < 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True

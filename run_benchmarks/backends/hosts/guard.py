"""Parent-death guards: whatever the orchestrator starts ends when the orchestrator does, even by SIGKILL.

Every process a job starts carries ``ACCELBENCH_JOB_TAG`` in its environment (launchers put workers in
sessions of their own, and a worker whose launcher died is re-parented, so neither a process group nor
a tree reaches them all; the tag does). Beside that, two more variables say whose process it is:
``ACCELBENCH_RUN_ID`` and ``ACCELBENCH_ORCHESTRATOR`` (``host:pid:start``), so a later run can tell a
leftover of a dead orchestrator from a neighbour that is still running.

The guard is the reaper's ``guard`` mode (hosts/reaper.py), run with ``python -c``, identical locally and over
SSH. It reads its stdin, which only the orchestrator holds open (a pipe locally, the SSH channel remotely;
without a pty sshd sends no SIGHUP, but it does close the command's stdin when the connection drops). At EOF
it ends every process carrying the tag (TERM, then KILL after the grace) and runs an optional cleanup
command (``docker rm -f`` of a node's container). One byte ``d`` before the EOF disarms it: the orchestrator
ended the job itself. With a command after its arguments it runs that command as its child and exits with
its code (the SSH watchdog); without, it only waits (the local guard).
"""
from __future__ import annotations

import os
import socket
from typing import Optional, Sequence

from training.contract.names import ENV_ORCHESTRATOR, ENV_RUN_ID  # noqa: F401 - re-exported for the runtimes

from run_benchmarks.backends.hosts import reaper

ENV_TAG = "ACCELBENCH_JOB_TAG"
DEATH_GRACE_S = 3.0  # after the orchestrator died: TERM, this long, then KILL (the goal: all gone in 5 s)
DISARM = b"d"

def guard_argv(python: str, tag: str, grace_s: float = DEATH_GRACE_S, cleanup: Sequence[str] = (),
               argv: Sequence[str] = ()) -> list[str]:
    return reaper.guard_argv(python, tag, grace_s, cleanup, argv)


def _start_ticks(pid: int) -> Optional[str]:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, unique."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def orchestrator_identity() -> dict:
    """This process as an orchestrator: host name and pid (what the results store needs to mark a run
    ``killed``), and its start time, which tells a reused pid from the same process."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_ticks(os.getpid()) or ""}


def orchestrator_tag() -> str:
    me = orchestrator_identity()
    return f"{me['host']}:{me['pid']}:{me['start']}"


def orchestrator_alive(host: str, pid: int | str, start: str = "") -> Optional[bool]:
    """Whether that orchestrator still runs: None when it ran on another machine (cannot be told from here)."""
    if host != socket.gethostname():
        return None
    ticks = _start_ticks(int(pid))
    return ticks is not None and (not start or ticks == start)

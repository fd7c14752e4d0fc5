"""SIGINT, SIGTERM and SIGHUP end a run the same way: every node stopped, logs collected, the round
recorded ``interrupted``; the exit code is 128 + the signal's number (130, 143, 129), as a shell reports
a command killed by it, so a script or CI job can tell which signal ended the run.

The first signal raises ``Interrupted`` (a ``KeyboardInterrupt``) in the main thread, unless it lands in
a ``deferred()`` block (a node being started, a round being cleaned up), which then finishes first. Any
later signal never raises: it only cuts the stop's grace short (``hurried()``), so the remaining
processes are killed at once while the logs are still gathered, sorted and recorded.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: Optional[int]) -> int:
    return 128 + (signum or signal.SIGINT)


def _stderr(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed terminal (SIGHUP) must not stop the cleanup
        pass


class _State:
    def __init__(self) -> None:
        self.first: Optional[int] = None
        self.raised = False
        self.quiet = False  # after the run: record, never raise
        self.deferring = 0
        self.hurry = threading.Event()
        self.notify: Callable[[str], None] = _stderr


_state = _State()


def _handler(signum: int, frame) -> None:
    name = signal.Signals(signum).name
    if _state.first is None:
        _state.first = signum
        if _state.quiet:
            return
        _state.notify(f"accelbench: {name}: stopping every node and collecting the logs "
                      "(again to kill without waiting)")
        if _state.deferring:
            return  # raised when the block ends
        _state.raised = True
        raise Interrupted(signum)
    if not _state.hurry.is_set():
        _state.hurry.set()
        _state.notify(f"accelbench: {name} again: killing what is left now; the logs are still collected")


def install(notify: Callable[[str], None] = _stderr) -> Callable[[], None]:
    """Handle the signals in this (main) thread; returns what restores the previous handlers."""
    global _state
    _state = _State()
    _state.notify = notify
    previous = {sig: signal.signal(sig, _handler) for sig in HANDLED}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return restore


@contextmanager
def restored() -> Iterator[None]:
    """The block leaves the handlers as it found them (a run refused at preflight has installed its own), unless
    a signal arrived: the process then leaves with 128 + its number (cli.main), and the handlers hold until it
    has, so that one more signal cannot kill it first."""
    previous = {sig: signal.getsignal(sig) for sig in HANDLED}
    try:
        yield
    finally:
        if received() is None:
            for sig, handler in previous.items():
                if handler is not None and signal.getsignal(sig) is not handler:
                    signal.signal(sig, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """A signal arriving inside waits until the block has finished, then raises."""
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1
        if not _state.deferring and _state.first is not None and not _state.raised and not _state.quiet:
            _state.raised = True
            raise Interrupted(_state.first)


def settle() -> None:
    """From now on signals are only recorded (the run is writing its results)."""
    _state.quiet = True


def received() -> Optional[int]:
    """The first signal that arrived, or None."""
    return _state.first


def hurried() -> bool:
    """A second signal arrived: skip the graces, kill at once."""
    return _state.hurry.is_set()

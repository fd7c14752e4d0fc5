"""Stopping a round's nodes when one of them can no longer be asked (its Docker engine or SSH connection is gone):
the others are still stopped and the round is still recorded, with a warning naming what failed."""
from __future__ import annotations

from typing import Optional

from run_benchmarks.backends.hosts.base import Job
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.execute.rounds import RoundExecutor


class GoneEngine(Job):
    """A node whose engine vanished: every question raises, as the Docker SDK's requests do then."""

    def poll(self) -> Optional[int]:
        raise ConnectionError("Connection aborted: Remote end closed connection without response")

    def stop(self, grace_s: float = 10.0) -> None:
        raise ConnectionError("Connection aborted: Remote end closed connection without response")


class Stoppable(Job):
    def __init__(self):
        self.code: Optional[int] = None

    def poll(self) -> Optional[int]:
        return self.code

    def stop(self, grace_s: float = 10.0) -> None:
        self.code = -15


class NoNodes:
    nodes: list = []


def test_a_node_that_cannot_be_asked_does_not_stop_the_others_being_stopped(tmp_path):
    executor = RoundExecutor.__new__(RoundExecutor)  # _stop needs none of the executor's collaborators
    result = RoundResult("gpt2_tiny:torch:cpu:2:1", 1, tmp_path, status="failed")
    alive, monitor = Stoppable(), Stoppable()
    executor._stop(NoNodes(), {0: GoneEngine(), 1: alive}, {0: GoneEngine(), 1: monitor}, result)
    assert alive.code == -15 and monitor.code == -15  # stopped although node 0 raised first
    assert result.exit_codes == {0: None, 1: -15}
    assert any(w.startswith("stopping node 0 failed: ConnectionError: Connection aborted") for w in result.warnings)
    assert any(w.startswith("stopping the monitor of node 0 failed: ConnectionError") for w in result.warnings)

"""``scheduler: hosts``: the cluster file's hosts, one node each, started by the host's node runtime."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from run_benchmarks.backends.schedulers.base import Scheduler

if TYPE_CHECKING:
    from run_benchmarks.backends.hosts import Job
    from run_benchmarks.results.round_result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan


class HostList(Scheduler):
    name = "hosts"

    def start_round(self, case: "CasePlan", rnd: "RoundPlan", result: "RoundResult",
                    jobs: dict[int, "Job"], monitors: dict[int, "Job"]) -> None:
        """Each node's monitor, then its launcher."""
        from run_benchmarks import signals
        for node in rnd.nodes:
            with signals.deferred():  # a start is not cut in half: what started is in the dicts, to stop
                monitor = self._start_monitor(case, node, result)
                if monitor is not None:
                    monitors[node.node_rank] = monitor
                jobs[node.node_rank] = self.runtimes.of(node).start_launcher(case, node)

    def _start_monitor(self, case: "CasePlan", node: "NodePlan", result: "RoundResult") -> Optional["Job"]:
        """The node's host and accelerator sampler; one that cannot start is a warning, not a failure."""
        if node.monitor_argv is None:
            return None
        try:
            return self.runtimes.of(node).start_monitor(case, node)
        except Exception as exc:  # noqa: BLE001 - the benchmark runs without its monitor
            result.warnings.append(f"the monitor of node {node.node_rank} did not start: {type(exc).__name__}: {exc}")
            return None

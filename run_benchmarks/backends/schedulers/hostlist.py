"""``scheduler: hosts``: the cluster file's hosts, one node each, started by the host's node runtime.

With ``master_port: auto`` the round's port is chosen on the master host (node 0's) just before its nodes
start, by its runtime (``NodeRuntime.choose_port``: training/contract/ports.py run there as an argv list,
over SSH too), and filled into every node's launcher argv.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from training.contract import ports

from run_benchmarks.backends.schedulers.base import Scheduler, auto_port

if TYPE_CHECKING:
    from run_benchmarks.backends.hosts import Job
    from run_benchmarks.results.rounds.result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan


class HostList(Scheduler):
    name = "hosts"

    def __init__(self, plan, hosts, runtimes):
        super().__init__(plan, hosts, runtimes)
        self.chosen: dict[str, int] = {}  # round folder -> the port its master host chose

    def start_round(self, case: "CasePlan", rnd: "RoundPlan", result: "RoundResult",
                    jobs: dict[int, "Job"], monitors: dict[int, "Job"]) -> None:
        """The master port where auto, then each node's monitor and launcher."""
        from run_benchmarks import signals
        port = None
        if auto_port(rnd):
            master = rnd.nodes[0]
            try:
                port = self.chosen[str(rnd.dir)] = self.runtimes.of(master).choose_port(master)
            except RuntimeError:
                if signals.received():  # Ctrl-C reached the chooser too (one process group): an interruption
                    raise signals.Interrupted(signals.received()) from None
                raise
        for node in rnd.nodes:
            with signals.deferred():  # a start is not cut in half: what started is in the dicts, to stop
                monitor = self._start_monitor(case, node, result)
                if monitor is not None:
                    monitors[node.node_rank] = monitor
                started = node if port is None else replace(node, argv=ports.filled(node.argv, port))
                jobs[node.node_rank] = self.runtimes.of(node).start_launcher(case, started)

    def rendezvous(self, rnd: "RoundPlan") -> dict:
        if str(rnd.dir) not in self.chosen:
            return super().rendezvous(rnd)
        return {"master_port": self.chosen[str(rnd.dir)], "chosen_by": f"auto, {self.port_chooser(rnd)}"}

    def _start_monitor(self, case: "CasePlan", node: "NodePlan", result: "RoundResult") -> Optional["Job"]:
        """The node's host and accelerator sampler; one that cannot start is a warning, not a failure."""
        if node.monitor_argv is None:
            return None
        try:
            return self.runtimes.of(node).start_monitor(case, node)
        except Exception as exc:  # noqa: BLE001 - the benchmark runs without its monitor
            result.warnings.append(f"the monitor of node {node.node_rank} did not start: {type(exc).__name__}: {exc}")
            return None

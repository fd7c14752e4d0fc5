"""A plan's execution on its hosts: preflight -> start nodes -> wait -> collect -> clean up -> analyse.

``Execution`` ties the parts together: ``preflight`` (hosts, runtimes, resources, versions, probes),
``rounds`` (start, wait, stop, collect, retry) and ``outcome`` (status, result document); the node
runtimes (``runtimes/``) own what differs between a process and a container. The store's lifecycle, the
signals and the run's ending around it are the Runner's (execute/runner.py).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

from run_benchmarks.backends import cleanup
from run_benchmarks.backends.hosts import Host
from run_benchmarks.execute.outcome import result_document, write_results
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.backends.fanout import fan_out
from run_benchmarks.plan import RunPlan
from run_benchmarks.execute.preflight import MIN_FREE_BYTES, Preflight
from run_benchmarks.execute.rounds import (MONITOR_GRACE_S, POLL_S, START_RETRIES, STOP_GRACE_S, Reporter, RoundExecutor, StepWatcher)
from run_benchmarks.backends.runtimes import RunRuntimes
from run_benchmarks.results.store.store import ResultStore

__all__ = ["MIN_FREE_BYTES", "MONITOR_GRACE_S", "POLL_S", "START_RETRIES", "STOP_GRACE_S", "Execution",
           "Reporter", "RoundResult", "StepWatcher", "fan_out", "result_document", "write_results"]


class Execution:
    """The hosts, runtimes and preflight of a plan, and its rounds run one after another (``run``); what it
    connected is let go by ``close``."""

    def __init__(self, plan: RunPlan, reporter: Reporter, orchestrator_env: dict,
                 allow_version_mismatch: bool = False, clock: Callable[[], float] = time.monotonic,
                 plan_root: Path | None = None, store: Optional[ResultStore] = None,
                 require_quiet: Optional[float] = None, say: Callable[[str], None] = print):
        self.plan, self.reporter, self.orchestrator_env = plan, reporter, orchestrator_env
        self.store = store  # every attempt becomes a row as soon as it ends
        self.clock = clock
        self.hosts: dict[str, Host] = {}
        self.results: list[RoundResult] = []
        self.runtimes = RunRuntimes(plan, self.hosts, plan_root)
        self.preflight = Preflight(plan, self.hosts, self.runtimes, allow_version_mismatch)
        self.machine_warnings: list[str] = []  # other runs' processes on the hosts: in every round's results
        self.leftovers: list[dict] = []  # their pids, per run: with every round, for `show --verbose`
        self.swept: list[str] = []  # containers of dead orchestrators removed at preflight
        self.require_quiet, self.say = require_quiet, say  # --require-quiet's deadline (execute/quiet.py)

    @property
    def notices(self) -> list[str]:
        """What the terminal should say before the first round: leftovers found, and removed."""
        return [*self.swept, *self.machine_warnings]

    @property
    def device_counts(self) -> dict[tuple[str, str], dict]:  # (host, kind) -> devices counted at preflight, and how
        return self.preflight.device_counts

    @property
    def probed(self) -> dict[tuple[str, str], dict]:  # (host, vendor) -> probe results
        return self.preflight.probed

    @property
    def version_warnings(self) -> dict[str, list[str]]:  # per case name
        return self.preflight.version_warnings

    def connect_and_preflight(self) -> None:
        """Every host at once: connect, prepare the runtimes, check resources and the framework's version;
        then look for another run's leftovers on the hosts (figures taken beside them may be low)."""
        self.preflight.run()
        for runtime in self.runtimes:
            self.swept += getattr(runtime, "swept", [])
        self.swept += cleanup.sweep_bridge_folders()  # Docker bridge sockets of orchestrators killed here
        self.machine_warnings, self.leftovers = cleanup.leftovers(self.hosts)

    def executor(self) -> RoundExecutor:
        """What runs one round after another on these hosts, into ``results`` and the store (a sweep's points
        too)."""
        return RoundExecutor(self.hosts, self.runtimes, self.preflight, self.reporter, self.orchestrator_env,
                             self.results, self.store, self.clock, self.machine_warnings,
                             leftovers=self.leftovers, require_quiet=self.require_quiet, say=self.say)

    def run(self) -> list[RoundResult]:
        rounds = self.executor()
        for case in self.plan.cases:
            for rnd in case.rounds:
                rounds.run(case, rnd)
        return self.results

    @property
    def scheduler(self):
        return self.preflight.scheduler

    def close(self) -> None:
        self.scheduler.close()
        self.runtimes.close()
        for host in self.hosts.values():
            host.close()
        self.hosts.clear()

"""A node as a process on its host: the launcher and the monitor started by the host backend."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from run_benchmarks.backends.hosts import Job
from run_benchmarks.backends.runtimes.base import NodeRuntime, job_env

if TYPE_CHECKING:
    from run_benchmarks.plan import CasePlan, NodePlan


class ProcessRuntime(NodeRuntime):
    name = "process"

    def installed_version(self, case: "CasePlan", node: "NodePlan") -> Optional[str]:
        return self.hosts[node.host.name].distribution_version(node.python, case.framework.distributions)

    def start_launcher(self, case: "CasePlan", node: "NodePlan") -> Job:
        return self.hosts[node.host.name].start(node.argv, job_env(node), node.cwd, node.launcher_log)

    def start_monitor(self, case: "CasePlan", node: "NodePlan") -> Job:
        return self.hosts[node.host.name].start(node.monitor_argv, job_env(node), node.cwd, node.monitor_log)

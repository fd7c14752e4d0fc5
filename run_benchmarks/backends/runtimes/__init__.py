"""Node runtimes as peers: how a node runs on its host. ``HostSpec.runtime`` names one.

``process``: the launcher as a process on the host. ``container``: the launcher in a container from the
vendor's image on the host's Docker engine. A new runtime subclasses ``NodeRuntime`` and registers under
its name by path, as the built-ins below: only the runtimes a run's hosts name are imported (the Docker SDK
only for containers).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Optional

from run_benchmarks.backends.runtimes.base import RUNTIMES, NodeRuntime, NodeSite

if TYPE_CHECKING:
    from run_benchmarks.backends.hosts import Host
    from run_benchmarks.plan import NodePlan, RunPlan

RUNTIMES.register("process", f"{__name__}.process:ProcessRuntime")
RUNTIMES.register("container", f"{__name__}.container:ContainerRuntime")


def get(name: str) -> type[NodeRuntime]:
    return RUNTIMES.get(name, "set hosts[].runtime in the cluster config")


class RunRuntimes:
    """One instance of each runtime a run's hosts name, sharing the run's connected hosts."""

    def __init__(self, plan: "RunPlan", hosts: Mapping[str, "Host"], plan_root: Optional[Path]):
        names = dict.fromkeys(node.host.runtime for case in plan.cases for rnd in case.rounds for node in rnd.nodes)
        self.by_name: dict[str, NodeRuntime] = {name: get(name)(hosts, plan_root) for name in names}

    def of(self, node: "NodePlan") -> NodeRuntime:
        return self.by_name[node.host.runtime]

    def __iter__(self) -> Iterator[NodeRuntime]:
        return iter(self.by_name.values())

    def close(self) -> None:
        for runtime in self:
            runtime.close()


__all__ = ["RUNTIMES", "NodeRuntime", "NodeSite", "RunRuntimes", "get"]

"""The node-runtime interface: how a node runs on its host (a process, a container, ...).

A runtime has two halves. Its plan hooks are class methods and pure: they add the runtime's part to a
node's plan (a container's name and mounts) and touch no host. An instance serves one run: it prepares
its hosts (code, images, the framework version check), starts each node's launcher and monitor, and
cleans up after a round, whatever the ending.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, ClassVar, Mapping, Optional, Sequence

from training.contract import ports
from training.contract.names import PORT_SCRIPT

from run_benchmarks.backends.codesync import sync_code
from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.registry import Registry
from run_benchmarks.backends.hosts import Host, Job
from run_benchmarks.backends.hosts.guard import ENV_ORCHESTRATOR, ENV_RUN_ID, orchestrator_tag

if TYPE_CHECKING:  # the plan imports the runtimes to build itself
    from run_benchmarks.plan import CasePlan, NodePlan


@dataclass(frozen=True)
class NodeSite:
    """Where a node's plan puts it, as its host sees the paths: what a plan hook may use."""

    host: HostSpec
    run_id: str
    case_slug: str
    round_index: int
    node_rank: int
    code_root: Path | PurePosixPath
    round_dir: Path | PurePosixPath
    cache_dir: Path | PurePosixPath
    vendor_dir: Optional[Path | PurePosixPath] = None  # the vendor's folder there: {vendor_dir}


def run_id_of(node: "NodePlan") -> str:
    return node.log_dir.parents[2].name  # <log root>/<run>/<case>/round<k>/<node>


def job_env(node: "NodePlan") -> dict[str, str]:
    """The node's environment plus whose it is: a later run tells a dead orchestrator's leftovers by it."""
    return {**node.env, ENV_RUN_ID: run_id_of(node), ENV_ORCHESTRATOR: orchestrator_tag()}


class NodeRuntime(ABC):
    name: ClassVar[str]

    # ------------------------------------------------------------ plan (pure)

    @classmethod
    def default_python(cls, orchestrator_python: str) -> str:
        """The launcher's interpreter when the host names none."""
        return orchestrator_python

    @classmethod
    def plan_node(cls, site: NodeSite) -> Optional[object]:
        """The runtime's part of a node's plan (``NodePlan.container``), or None."""
        return None

    # ------------------------------------------------------------ run

    def __init__(self, hosts: Mapping[str, Host], plan_root: Optional[Path]):
        self.hosts = hosts  # the run's connected hosts, by name (filled at connect, shared)
        self.plan_root = plan_root  # the checkout whose workload code goes to remote hosts

    def sync_code(self, node: "NodePlan") -> None:
        """Copy the workload code to a remote node's host (``node.cwd``) unless it is there already."""
        try:
            sync_code(self.hosts[node.host.name], self.plan_root, node.cwd)
        except OSError as exc:
            raise PreflightError(f"host {node.host.name}: could not copy the workload code to {node.cwd}: {exc}",
                                 "check that work_root in the cluster config is writable on that host") from None

    def port_python(self, node: "NodePlan") -> str:
        """The interpreter on the node's host that chooses a port there (the launcher's)."""
        return node.python

    def choose_port(self, node: "NodePlan") -> int:
        """A free rendezvous port on the node's host, chosen there when the round starts: ``ports.py`` run as a
        file by the host's Python (an argv list, over SSH too; nothing but the standard library needed)."""
        host = self.hosts[node.host.name]
        # A remote host runs the synced copy; this machine runs the very file the orchestrator imported (a --root
        # of configs alone, as tests and users give, holds no training/)
        script = node.cwd / PORT_SCRIPT if node.remote_dir is not None else Path(ports.__file__)
        done = host.run([self.port_python(node), str(script)])
        port = ports.read_port(done.stdout[-16:]) if done.returncode == 0 else None
        if port is None:
            raise RuntimeError(f"host {node.host.name}: choosing the master port there failed (exit "
                               f"{done.returncode}): {(done.stderr or done.stdout).strip()[-300:]}")
        return port

    def prepare(self, cases: Sequence["CasePlan"]) -> None:
        """Whatever must exist on the hosts before a node of these cases starts (e.g. images)."""

    @abstractmethod
    def installed_version(self, case: "CasePlan", node: "NodePlan") -> Optional[str]:
        """The installed version of the case's framework where the node's launcher runs, or None."""

    @abstractmethod
    def start_launcher(self, case: "CasePlan", node: "NodePlan") -> Job:
        """Start the node's framework launcher; its output goes to ``node.launcher_log``."""

    @abstractmethod
    def start_monitor(self, case: "CasePlan", node: "NodePlan") -> Job:
        """Start the node's monitor (``node.monitor_argv``); its output goes to ``node.monitor_log``."""

    def cleanup(self, node: "NodePlan") -> None:
        """After the node's jobs were stopped: remove what the runtime left behind."""

    def describe(self, case: "CasePlan", node: "NodePlan") -> dict:
        """What the node ran in, for its entry in the result document."""
        return {"image": None, "image_id": None}

    def close(self) -> None:
        """Let go of the run's connections (hosts are closed by their owner)."""


RUNTIMES: Registry[type[NodeRuntime]] = Registry("node runtime")  # the built-ins: by path, in __init__

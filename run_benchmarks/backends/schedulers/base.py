"""The scheduler interface. Its plan hooks are class attributes and methods, pure: where nodes' folders are
and which addresses the launchers are given. An instance serves one run: its own preflight, the start of a
round's nodes, what it adds to a node's record, and how it reads a round's ending."""
from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Mapping, Sequence

from training.contract import ports

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.registry import Registry

if TYPE_CHECKING:
    from run_benchmarks.backends.hosts import Host, Job
    from run_benchmarks.results.rounds.result import RoundResult
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan, RunPlan
    from run_benchmarks.backends.runtimes import RunRuntimes


class Scheduler(ABC):
    name: ClassVar[str]
    # Node folders live in a folder shared with the nodes (work_root of the node hosts), not in the log root:
    # the logs are copied into the run folder after the round, as from SSH hosts.
    shared_folder: ClassVar[bool] = False
    # Preflight counts devices and runs the vendor's probes on the node hosts: only where they are the
    # machines the nodes run on (not a login node standing for a whole partition).
    checks_hosts: ClassVar[bool] = True
    # Preflight asks the nodes' interpreter for the framework's version from here: not where the nodes run an
    # image this machine does not have (Kubernetes); the worker records the version it ran with anyway.
    checks_framework: ClassVar[bool] = True

    # ------------------------------------------------------------ plan (pure)

    @classmethod
    def master_address(cls, hosts: Sequence[HostSpec]) -> str:
        return hosts[0].address

    @classmethod
    def node_address(cls, host: HostSpec) -> str:
        return host.address

    @classmethod
    def port_chooser(cls, rnd: "RoundPlan") -> str:
        """Who chooses a ``master_port: auto`` round's port, and where (the dry run and the record say it)."""
        node = rnd.nodes[0]
        return f"chosen on host {node.host.name} ({node.host.address}) when the round starts"

    @classmethod
    def port_choice(cls, rnd: "RoundPlan") -> str:
        """The round's master port as the plan knows it: the cluster file's, or auto and who chooses it."""
        if rnd.master_port is not None:
            return f"{rnd.master_port} (master_port of the cluster file)"
        if not auto_port(rnd):
            return "none (the launcher of one node needs no rendezvous port)"
        return f"auto, {cls.port_chooser(rnd)}"

    @classmethod
    def dry_run(cls, plan: "RunPlan", case: "CasePlan") -> list[str]:
        """What the scheduler would submit for the case's first round, as lines to print (none to add)."""
        return []

    # ------------------------------------------------------------ run

    def __init__(self, plan: "RunPlan", hosts: Mapping[str, "Host"], runtimes: "RunRuntimes"):
        self.plan, self.hosts, self.runtimes = plan, hosts, runtimes

    def preflight(self) -> None:
        """The scheduler's own checks before anything is queued or started (raise PreflightError)."""

    @abstractmethod
    def start_round(self, case: "CasePlan", rnd: "RoundPlan", result: "RoundResult",
                    jobs: dict[int, "Job"], monitors: dict[int, "Job"]) -> None:
        """Start every node of the round; ``jobs`` and ``monitors`` get what started (by node rank), so
        that whatever happens next can stop it."""

    def live_dir(self, node: "NodePlan") -> Path:
        """Where the node's logs can be read while it runs (progress): the log folder unless shared."""
        return node.log_dir

    def conclude(self, ending: str, result: "RoundResult") -> str:
        """After the nodes were stopped: the round's ending as the scheduler saw it (e.g. its time limit)."""
        return ending

    def node_facts(self, node: "NodePlan") -> dict:
        """What the scheduler adds to the node's entry in the round's record (job id, node name, ...)."""
        return {}

    def rendezvous(self, rnd: "RoundPlan") -> dict:
        """The round's master port for its record, once its logs are here: the cluster file's, or the one its
        master chose and wrote to ``ports.PORT_FILE`` in node 0's folder (None where that never happened)."""
        if rnd.master_port is not None:
            return {"master_port": rnd.master_port, "chosen_by": "master_port of the cluster file"}
        if not auto_port(rnd):
            return {}
        try:
            port = ports.read_port((rnd.nodes[0].log_dir / ports.PORT_FILE).read_text(encoding="utf-8")[:16])
        except OSError:
            port = None
        return {"master_port": port, "chosen_by": f"auto, {self.port_chooser(rnd)}"}

    def fetch_logs(self, node: "NodePlan") -> None:
        """Bring the node's logs from its host into ``node.log_dir`` (raise OSError when it cannot)."""
        self.hosts[node.host.name].get(node.remote_dir, node.log_dir)

    def close(self) -> None:
        """Let go of what the run held (connections, guards)."""


SCHEDULERS: Registry[type[Scheduler]] = Registry("scheduler")  # the built-ins: by path, in __init__


def auto_port(rnd: "RoundPlan") -> bool:
    """Whether the round's launchers wait for a port chosen when it starts (``ports.PLACEHOLDER`` planned)."""
    return any(ports.PLACEHOLDER in word for node in rnd.nodes for word in node.argv)


def clear_port_file(rnd: "RoundPlan") -> None:
    """A shared folder's port file of an earlier attempt of the round goes before the round is submitted: the
    nodes must wait for this attempt's port, never read the last one's."""
    Path(rnd.nodes[0].host_dir / ports.PORT_FILE).unlink(missing_ok=True)


def check_writable(folder: Path, key: str, fix: str) -> None:
    """A shared folder this machine must write (code, configs), refused at preflight with ``key`` named."""
    probe = folder / f".accelbench-write-check-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok\n", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise PreflightError(f"the shared directory {folder} ({key}) is not writable from here: "
                             f"{exc.strerror or exc}", fix) from None

"""The plan's types: a run of cases, each of rounds, each of nodes, with where every log goes.

Plain frozen records that every part of a run reads (backends, execution, results); they import no backend,
so a backend can name them without depending on the planner that builds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

from training.contract.spec import WorkerConfig, WorkloadSpec

from run_benchmarks.catalog import casename, frameworks
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.compliance import Compliance
from run_benchmarks.catalog.config_files import ClusterSpec, HostSpec, TestConf
from run_benchmarks.catalog.contention_limits import ContentionLimits
from run_benchmarks.catalog.vendors import Hardware, VendorRegistry


@dataclass(frozen=True)
class ContainerPlan:
    """A container node runtime's part of a node: its unique name (what cleanup removes) and mounts."""

    name: str  # unique per run, case, round and node
    mounts: dict[str, str]  # host path -> ro/rw, mounted at the same path inside

    @property
    def monitor_name(self) -> str:
        return f"{self.name}-monitor"


@dataclass(frozen=True)
class Paths:
    """Where accelbench's own trees are. ``root`` holds cases/, vendors/, configs/ and training/."""

    root: Path

    @property
    def cases_dir(self) -> Path:
        return self.root / "cases"

    @property
    def vendors_dir(self) -> Path:
        return self.root / "vendors"

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"


@dataclass(frozen=True)
class NodePlan:
    node_rank: int
    host: HostSpec
    python: str  # the interpreter that runs the launcher, whose framework version is checked
    argv: list[str]
    env: dict[str, str]
    cwd: Path  # on the host
    log_dir: Path  # here: where the node's logs end up
    remote_dir: Optional[PurePosixPath] = None  # ssh hosts: the node's folder on the host, collected after
    container: Optional[ContainerPlan] = None  # the node runtime's part (container: name and mounts)
    monitor_argv: Optional[list[str]] = None  # host and accelerator sampler started beside the launcher

    @property
    def launcher_log(self) -> Path:
        return self.log_dir / "launcher.log"

    @property
    def monitor_log(self) -> Path:
        return self.log_dir / "monitor.log"

    @property
    def monitor_dir(self) -> Path:
        return self.log_dir / "monitor"

    @property
    def host_dir(self) -> Path | PurePosixPath:
        """The node's folder as the host sees it (the launcher writes there)."""
        return self.remote_dir if self.remote_dir is not None else self.log_dir


@dataclass(frozen=True)
class RoundPlan:
    index: int
    dir: Path
    worker_config: WorkerConfig
    nodes: list[NodePlan]
    master_port: Optional[int] = None  # the cluster file's; None: auto, chosen on the master when the round starts

    @property
    def config_path(self) -> Path:
        return self.dir / "config.json"

    @property
    def results_path(self) -> Path:
        return self.dir / "results.json"


@dataclass(frozen=True)
class CasePlan:
    name: casename.CaseName
    framework: frameworks.Framework
    hardware: Hardware
    case_file: Path
    extern_config: Optional[Path]
    workload: WorkloadSpec
    provenance: dict
    timeout_s: float
    dir: Path
    rounds: list[RoundPlan]
    notes: tuple[str, ...] = ()  # how the inputs were read (which extern file, what a FlagPerf config mapped)
    compliance: Optional[Compliance] = None  # the workload against its case's policy (None: no policy to judge by)
    contention: ContentionLimits = field(default_factory=ContentionLimits)  # when a round is not judged


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    dir: Path
    cases: list[CasePlan] = field(default_factory=list)
    cluster: Optional[ClusterSpec] = None  # where the nodes come from (None: this machine's host list)


@dataclass(frozen=True)
class PlanInputs:
    """Everything a plan depends on, loaded and validated."""

    paths: Paths
    test_conf: TestConf
    test_conf_path: Path
    cluster: ClusterSpec
    cluster_path: Path
    vendors: VendorRegistry
    catalog: CaseCatalog
    default_python: str

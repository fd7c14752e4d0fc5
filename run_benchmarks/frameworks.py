"""The framework registry: how each framework's own distributed launcher is started.

A framework plugs in with ``@register``: it names the Python distribution whose
version the case name's ``<framework>_<version>`` must match, the collective
backend per device type, the launcher argv for one node, and where that
launcher leaves each rank's output.
"""
from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .errors import UserError

if TYPE_CHECKING:
    from training.spec import WorkloadSpec

WORKER_MODULE = "training.run_pretraining"


@dataclass(frozen=True)
class NodeLaunch:
    """What one node's launcher must know."""

    python: str
    nnodes: int
    nprocs_per_node: int
    node_rank: int
    master_addr: str
    master_port: int
    local_addr: str
    log_dir: Path
    worker_config: Path


@dataclass(frozen=True)
class RankLogs:
    rank: int
    stdout: Path
    stderr: Path


class Framework(ABC):
    name: str
    distribution: str  # the pip distribution whose version the case name pins
    backends: dict[str, str]  # device type -> collective backend

    def backend_for(self, device: str) -> str:
        return self.backends[device]

    def unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        """Parts of a (consistent) layout this framework's workload cannot run; empty when it can."""
        return []

    @abstractmethod
    def launcher_argv(self, node: NodeLaunch) -> list[str]:
        ...

    @abstractmethod
    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        """Where a running rank's stdout is being written, once the launcher has made it."""

    @abstractmethod
    def gather_rank_logs(self, node_dir: Path, node_rank: int, nprocs_per_node: int) -> list[RankLogs]:
        """Move the launcher's per-rank output to ``rank<N>.stdout.log``/``.stderr.log``."""


_REGISTRY: dict[str, Framework] = {}


def register(cls: type[Framework]) -> type[Framework]:
    _REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Framework:
    if name not in _REGISTRY:
        raise UserError(f"unknown framework {name!r}", f"known frameworks: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def names() -> list[str]:
    return sorted(_REGISTRY)


@register
class Torch(Framework):
    name = "torch"
    distribution = "torch"
    backends = {"cpu": "gloo", "cuda": "nccl"}

    def unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        par = workload.parallel
        missing = []
        if par.tensor_parallel_degree > 1 and par.sharding in ("none", "stage1") and par.data_degree(world_size) > 1:
            missing.append("data parallelism across tensor-parallel groups needs sharding stage2 or stage3 "
                           "(FSDP2 x TP); DDP and ZeRO-1 over tensor-parallel parameters are not supported")
        if workload.train.precision == "fp16" and par.tensor_parallel_degree > 1:
            missing.append("fp16 loss scaling cannot unscale tensor-parallel (DTensor) and replicated gradients "
                           "together; use precision bf16 with tensor parallelism")
        if workload.train.lora_rank and par.tensor_parallel_degree > 1:
            missing.append("LoRA adapters are not split by tensor parallelism yet; use data parallelism or sharding")
        if par.pipeline_parallel_degree > 1 and par.tensor_parallel_degree > 1:
            missing.append("pipeline x tensor parallelism (3-D layouts) is not implemented in training/torch yet")
        if par.pipeline_parallel_degree > 1 and par.sharding in ("none", "stage1") and par.data_degree(world_size) > 1:
            missing.append("data parallelism across pipelines needs sharding stage2 or stage3 (FSDP2 x PP); "
                           "DDP over pipeline stages misses gradients under some schedules")
        return missing

    def launcher_argv(self, node: NodeLaunch) -> list[str]:
        # Static rendezvous on (master_addr, master_port, node_rank): no hostname lookups, so nodes
        # that share a hostname (containers with --network host) still meet; --local-addr keeps
        # each node's advertised address distinct.
        return [
            node.python, "-m", "torch.distributed.run",
            f"--nnodes={node.nnodes}",
            f"--nproc-per-node={node.nprocs_per_node}",
            f"--node-rank={node.node_rank}",
            f"--master-addr={node.master_addr}",
            f"--master-port={node.master_port}",
            f"--local-addr={node.local_addr}",
            "--max-restarts=0",
            # The agent checks its workers 10x a second by default; once a second finds a failure soon
            # enough and keeps its wake-ups off the cores being measured.
            "--monitor-interval=1",
            f"--log-dir={node.log_dir / 'torchrun'}",
            "--redirects=3",
            "-m", WORKER_MODULE,
            "--config", str(node.worker_config),
        ]

    @staticmethod
    def _attempts(node_dir: Path) -> list[Path]:
        # torchrun writes <log-dir>/<rdzv run id>_<random>/attempt_<n>/<local rank>/std{out,err}.log
        return sorted((node_dir / "torchrun").glob("*/attempt_*"), key=lambda p: p.stat().st_mtime)

    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        attempts = self._attempts(node_dir)
        return attempts[-1] / str(local_rank) / "stdout.log" if attempts else None

    def gather_rank_logs(self, node_dir: Path, node_rank: int, nprocs_per_node: int) -> list[RankLogs]:
        out = []
        attempts = self._attempts(node_dir)
        for local_rank in range(nprocs_per_node):
            rank = node_rank * nprocs_per_node + local_rank
            logs = RankLogs(rank, node_dir / f"rank{rank}.stdout.log", node_dir / f"rank{rank}.stderr.log")
            for attempt in attempts[-1:]:
                for stream, target in (("stdout", logs.stdout), ("stderr", logs.stderr)):
                    source = attempt / str(local_rank) / f"{stream}.log"
                    if source.is_file():
                        shutil.move(source, target)
            out.append(logs)
        shutil.rmtree(node_dir / "torchrun", ignore_errors=True)
        return out

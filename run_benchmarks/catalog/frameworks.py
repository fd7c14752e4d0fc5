"""The framework registry: how each framework's own distributed launcher is started.

A framework plugs in with ``@register`` (the project's one registry style,
``registry.py``): it names the Python distribution whose version the case name's
``<framework>_<version>`` must match, the launcher argv for one node, and where
that launcher leaves each rank's output. The collective backend is the
accelerator kind's (``kinds.py``).
"""
from __future__ import annotations

import re
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from training.contract.names import WORKER_MODULE, WORKER_SCRIPT

from run_benchmarks.registry import Registry

if TYPE_CHECKING:
    from training.contract.spec import WorkloadSpec



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
    code_root: Path  # where this checkout's training/ is on the host (or in the container)


@dataclass(frozen=True)
class RankLogs:
    rank: int
    stdout: Path
    stderr: Path


class Framework(ABC):
    name: str
    distributions: tuple[str, ...]  # the pip distribution(s) whose version the case name pins, first found wins
    rank_log_names: tuple[str, ...] = ("rank<N>.stdout.log", "rank<N>.stderr.log")  # what gather_rank_logs leaves

    # A rank that could not connect its collective backend at start-up did not run the benchmark: the round
    # is retried (rounds.START_RETRIES) instead of recorded. Gloo's full-mesh connect sometimes meets a peer
    # that is not listening yet (seen with 4 Paddle ranks on 2 cores: "Connection refused", or a timeout).
    # The rendezvous store's master port taken by another process since it was chosen (torch's TCPStore:
    # "failed to listen on any local network address ... EADDRINUSE") is one too: no rank ever met another.
    start_error = re.compile(r"(?i)gloo.*(connection refused|connectfullmesh|timed? ?out)"
                             r"|connectfullmesh failed|gloo.*connect.*(refused|reset)"
                             r"|server socket has failed to listen on any local network address.*eaddrinuse")

    def start_error_in(self, lines: list[str]) -> Optional[str]:
        """The first line that says the ranks never connected, or None."""
        return next((line for line in lines if self.start_error.search(line)), None)

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


FRAMEWORKS: Registry[Framework] = Registry("framework", instantiate=True)


def register(cls: type[Framework]) -> type[Framework]:
    return FRAMEWORKS.register(cls.name)(cls)


def get(name: str) -> Framework:
    return FRAMEWORKS.get(name)


def names() -> list[str]:
    return list(FRAMEWORKS)


@register
class Torch(Framework):
    name = "torch"
    distributions = ("torch",)

    def unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        par = workload.parallel
        missing = []
        if par.tensor_parallel_degree > 1 and par.sharding in ("none", "stage1") and par.data_degree(world_size) > 1:
            missing.append("data parallelism across tensor-parallel groups needs sharding stage2 or stage3 "
                           "(FSDP2 x TP); DDP and ZeRO-1 over tensor-parallel parameters are not supported")
        shard = par.sharding_parallel_degree
        if shard not in (None, par.data_degree(world_size)) and par.sharding != "none":
            missing.append(f"sharding_parallel_degree {shard}: training/torch shards across all "
                           f"{par.data_degree(world_size)} data-parallel ranks (leave it unset)")
        if workload.train.amp_level == "O2":
            missing.append("train.amp_level O2 is Paddle's; torch runs O1 (autocast over fp32 weights)")
        if workload.train.precision == "fp8" and not workload.train.compile:
            missing.append("precision fp8 (torchao float8) pays off only compiled: its casts run eagerly "
                           "otherwise and the figure would measure them; set train.compile (e.g. default)")
        if workload.train.fused_norm:
            missing.append("train.fused_norm is Paddle's fused RMSNorm; unset it for torch")
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
            # The agent checks its workers 10x a second by default (0.1 s). Every 0.25 s still finds an
            # exit soon after the workers end (a sweep's next point waits on it) with few wake-ups on the
            # cores being measured; 1 s cost a sweep about 1 s per point (docs/benchmarks.md).
            "--monitor-interval=0.25",
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


@register
class Paddle(Framework):
    """``python -m paddle.distributed.launch``, one launcher per node; never hand-built endpoints."""

    name = "paddle"
    distributions = ("paddlepaddle-gpu", "paddlepaddle")
    rank_log_names = ("rank<N>.log (stdout and stderr)", "paddle-launcher.log")

    def unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        par, train = workload.parallel, workload.train
        missing = []
        if workload.task == "ppo":  # micro: training/micro/paddle_ops.py
            missing.append("task ppo: training/paddle trains pretrain, finetune and lora cases (and micro)")
        if train.precision == "fp8":
            missing.append("precision fp8: training/paddle has no fp8 path; use fp16 or bf16")
        if workload.debug.grad_noise:
            missing.append("debug.grad_noise perturbs gradients in training/torch only; unset it for paddle")
        if train.lora_rank and (par.tensor_parallel_degree > 1 or par.pipeline_parallel_degree > 1
                                or par.sequence_parallel):
            missing.append("LoRA in training/paddle adapts one model-parallel rank's plain linears: use data "
                           "parallelism or sharding (tensor, sequence and pipeline parallel are not implemented)")
        if workload.data.instruction and par.pipeline_parallel_degree > 1:
            missing.append("instruction data in a Paddle pipeline is not implemented (fleet's PipelineLayer fixes "
                           "its shapes, instruction batches vary in width); use tensor parallelism or sharding")
        if train.compile:
            missing.append("train.compile is torch.compile; Paddle runs eagerly here (unset it)")
        if par.sequence_parallel and par.pipeline_parallel_degree > 1:
            missing.append("sequence_parallel with pipeline parallelism is not implemented in training/paddle "
                           "(its PipelineLayer stages pass whole sequences); use it with tensor parallelism alone")
        if par.pipeline_schedule != "1f1b" and par.pipeline_parallel_degree > 1:
            missing.append(f"pipeline_schedule {par.pipeline_schedule}: fleet's PipelineLayer runs 1f1b here")
        if par.offload and par.sharding != "stage3":
            missing.append("offload with Paddle needs sharding stage3 (group_sharded_parallel offload)")
        return missing

    def launcher_argv(self, node: NodeLaunch) -> list[str]:
        argv = [
            node.python, "-m", "paddle.distributed.launch",
            f"--nnodes={node.nnodes}",
            f"--nproc_per_node={node.nprocs_per_node}",
            f"--log_dir={node.log_dir / 'paddle'}",
            "--job_id=accelbench",
            "--max_restart=0",
        ]
        if node.nnodes > 1:
            # The master's store on (master_addr, master_port); --rank fixes this node's place and --host the
            # address it advertises (containers with --network host share one hostname).
            argv += [f"--master={node.master_addr}:{node.master_port}", f"--rank={node.node_rank}",
                     f"--host={node.local_addr}"]
        # The launcher takes a script, not a module: training/run_pretraining.py puts its root on sys.path.
        return argv + [str(node.code_root / WORKER_SCRIPT), "--config", str(node.worker_config)]

    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        path = node_dir / "paddle" / f"workerlog.{local_rank}"
        return path if path.is_file() else None

    def gather_rank_logs(self, node_dir: Path, node_rank: int, nprocs_per_node: int) -> list[RankLogs]:
        """Paddle's launcher writes one merged stdout+stderr per rank (``workerlog.<local rank>``): both
        streams of a rank point at it; the launcher's own log is kept as ``paddle-launcher.log``."""
        launcher_dir = node_dir / "paddle"
        out = []
        for local_rank in range(nprocs_per_node):
            rank = node_rank * nprocs_per_node + local_rank
            merged = node_dir / f"rank{rank}.log"
            source = launcher_dir / f"workerlog.{local_rank}"
            if source.is_file():
                shutil.move(source, merged)
            out.append(RankLogs(rank, merged, merged))
        for launcher_log in sorted(launcher_dir.glob("default.*.log")):
            shutil.move(launcher_log, node_dir / "paddle-launcher.log")
        shutil.rmtree(launcher_dir, ignore_errors=True)
        return out

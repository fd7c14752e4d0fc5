"""Task micro as a case: the worker entry runs the case's micro-benchmark under the framework's launcher
(torchrun, ``paddle.distributed.launch``), exactly as a training round starts, and reports it through the
perf-record contract.

A round reads as ``ok`` when every rank reported start and end (training/contract/perflog.py); a micro-benchmark has
no steps, so its start record carries no model (zero parameters, zero FLOPs per token) and its figures are
the round's result. Framework-free: each framework brings its ``MicroOps`` (torch_ops.py, paddle_ops.py),
picked here once. ``python -m training.micro --spec`` stays the direct way in (torch), without a case.
"""
from __future__ import annotations

from typing import Callable, Iterator

from training import harness
from training.contract import perflog
from training.contract.names import Ranks
from training.micro.ops import MicroOps
from training.contract.micro import MicroSpec
from training.contract.registry import Registry
from training.contract.spec import WorkerConfig
from training.unsupported import UnsupportedOnDevice

# The benchmark of each MicroSpec.bench: a function (spec, ops, rank) -> figure records.
BENCHES: Registry[Callable[..., Iterator[perflog.FigureRecord]]] = Registry("micro-benchmark")
BENCHES.register("gemm", "training.micro.gemm:run")
BENCHES.register("membw", "training.micro.membw:run")
BENCHES.register("collective", "training.micro.collectives:run")
# Each framework's operations, imported only for the framework a round runs.
FRAMEWORK_OPS: Registry[type[MicroOps]] = Registry("micro-benchmark framework")
FRAMEWORK_OPS.register("torch", "training.micro.torch_ops:TorchOps")
FRAMEWORK_OPS.register("paddle", "training.micro.paddle_ops:PaddleOps")
NO_MODEL_FORMULA = "micro-benchmark: no model; each figure states its own formula"


def figures(spec: MicroSpec, ops: MicroOps, rank: int) -> Iterator[perflog.FigureRecord]:
    """The benchmark's figure records, in the order measured."""
    return BENCHES.get(spec.bench)(spec, ops, rank)


def ops_class(framework: str) -> type[MicroOps]:
    if framework not in FRAMEWORK_OPS:
        raise UnsupportedOnDevice(f"task micro has no {framework} operations in this accelbench "
                                  f"(frameworks: {', '.join(FRAMEWORK_OPS)})")
    return FRAMEWORK_OPS.get(framework)


class MicroTask(harness.Task):
    """A micro-benchmark as a task: its figures are the round's result; a group only for collectives (GEMM and
    memory figures are each device's own)."""

    def __init__(self, cfg: WorkerConfig, ranks: Ranks):
        self.spec, self.rank = cfg.workload.micro, ranks.rank
        self.ops = ops_class(cfg.runtime.framework).open(cfg.runtime.device, ranks.local_rank)
        self.framework, self.version, self.device, self.on_cpu = (self.ops.framework, self.ops.version,
                                                                  self.ops.device, self.ops.on_cpu)
        self.grouped = self.spec.bench == "collective"
        if self.grouped:
            self.ops.open_group()

    def workload(self) -> harness.Workload:
        return harness.Workload(precision="n/a", n_params=0, trainable_params=0, flops_per_token=0.0,
                                flop_formula=NO_MODEL_FORMULA, tokens_per_step=0)

    def environment(self) -> dict:
        return self.ops.environment()

    def records(self) -> Iterator[perflog.Record]:
        try:
            yield from figures(self.spec, self.ops, self.rank)
        finally:
            self.close()

    def ending(self) -> harness.Ending:
        """Peak memory as training rounds report it: the process's peak RSS on a CPU, the allocator's on a
        device."""
        return harness.Ending(steps=0, memory=harness.peak_memory(self.ops))

    def close(self) -> None:
        if self.grouped:
            self.grouped = False
            self.ops.close_group()


def run(cfg: WorkerConfig) -> None:
    """Task micro, on the framework of the round: start record, the benchmark's figures, end record."""
    harness.run(cfg, MicroTask)

"""Task micro as a case: the worker entry runs the case's micro-benchmark under the framework's launcher
(torchrun, ``paddle.distributed.launch``), exactly as a training round starts, and reports it through the
perf-record contract.

A round reads as ``ok`` when every rank reported start and end (training/contract/perflog.py); a micro-benchmark has
no steps, so its start record carries no model (zero parameters, zero FLOPs per token) and its figures are
the round's result. Framework-free: each framework brings its ``MicroOps`` (torch_ops.py, paddle_ops.py),
picked here once. ``python -m training.micro --spec`` stays the direct way in (torch), without a case.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

from training import harness, plugins
from training.contract import perflog
from training.micro.ops import MicroOps
from training.contract.micro import MicroSpec
from training.contract.registry import Registry
from training.contract.spec import WorkerConfig
from training.sysinfo import node_environment, process_age_s
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


def run(cfg: WorkerConfig) -> None:
    """Start record, the benchmark's figures, end record; a group only for collectives (GEMM and memory
    figures are each device's own)."""
    spec, opener = cfg.workload.micro, ops_class(cfg.runtime.framework)
    ranks = harness.read_ranks(opener.ranks)
    try:
        plugin = plugins.load(cfg.runtime.device)
        if plugin is not None:
            plugin.setup(cfg.runtime.device)  # before the framework touches the device
        ops = opener.open(cfg.runtime.device, ranks.local_rank)
    except UnsupportedOnDevice as exc:
        exc.rank = ranks.rank
        raise
    grouped = spec.bench == "collective"
    if grouped:
        ops.open_group()
    try:
        perflog.emit(_start_record(cfg, ranks, ops, plugin))
        try:
            for record in figures(spec, ops, ranks.rank):
                perflog.emit(record)
        except UnsupportedOnDevice as exc:
            exc.rank = ranks.rank
            raise
        perflog.emit(_end_record(ranks.rank, ops))
    finally:
        if grouped:
            ops.close_group()


def _start_record(cfg: WorkerConfig, ranks: harness.Ranks, ops: MicroOps, plugin) -> perflog.StartRecord:
    environment = None
    if ranks.local_rank == 0:
        environment = {**node_environment(), **ops.environment(), "accelerator_kind": cfg.runtime.device.kind}
        variable = cfg.runtime.device.visible_devices_env
        if variable:
            environment["visible_devices"] = {variable: os.environ.get(variable)}
        if plugin is not None:
            environment.update(plugin.environment())
    return perflog.StartRecord(
        rank=ranks.rank, local_rank=ranks.local_rank, node_rank=ranks.node_rank, world_size=ranks.world_size,
        framework=ops.framework, framework_version=ops.version, device=ops.device, precision="n/a",
        n_params=0, flops_per_token=0.0, flop_formula=NO_MODEL_FORMULA, tokens_per_step=0,
        environment=environment, trainable_params=0, init_time_s=process_age_s())


def _end_record(rank: int, ops: MicroOps) -> perflog.EndRecord:
    """Peak memory as training rounds report it: the process's peak RSS on a CPU, the allocator's on a device."""
    if ops.on_cpu:
        return perflog.EndRecord(rank=rank, steps=0, peak_memory_bytes=harness.peak_rss(),
                                 memory_total_bytes=harness.memory_total_bytes(), memory_kind="rss")
    memory = ops.memory()
    return perflog.EndRecord(rank=rank, steps=0, peak_memory_bytes=memory.peak_allocated,
                             memory_total_bytes=memory.total, memory_kind="allocated",
                             peak_memory_reserved_bytes=memory.peak_reserved)

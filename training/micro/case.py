"""Task micro as a case: the worker entry runs the case's micro-benchmark under the framework's launcher
(torchrun), exactly as a training round starts, and reports it through the perf-record contract.

A round reads as ``ok`` when every rank reported start and end (training/perflog.py); a micro-benchmark has
no steps, so its start record carries no model (zero parameters, zero FLOPs per token) and its figures are
the round's result. ``python -m training.micro --spec`` stays the direct way in, without a case.
"""
from __future__ import annotations

import os

import torch

from training import harness, perflog, plugins
from training.micro import collectives, gemm, membw
from training.sysinfo import node_environment, process_age_s
from training.spec import WorkerConfig
from training.torch import device as devices
from training.unsupported import UnsupportedOnDevice

BENCHES = {"gemm": gemm.run, "membw": membw.run, "collective": collectives.run}
TORCHRUN = harness.RankVariables(rank="RANK", world_size="WORLD_SIZE", local_rank="LOCAL_RANK",
                                 node_rank="GROUP_RANK")
NO_MODEL_FORMULA = "micro-benchmark: no model; each figure states its own formula"


def run(cfg: WorkerConfig) -> None:
    """Start record, the benchmark's figures, end record; a group only for collectives (GEMM and memory
    figures are each device's own)."""
    spec, ranks = cfg.workload.micro, harness.read_ranks(TORCHRUN)
    try:
        plugin = plugins.load(cfg.runtime.device)
        if plugin is not None:
            plugin.setup(cfg.runtime.device)
        device = devices.open_device(cfg.runtime.device, ranks.local_rank)
    except UnsupportedOnDevice as exc:
        exc.rank = ranks.rank
        raise
    grouped = spec.bench == "collective"
    if grouped:
        devices.init_process_group(cfg.runtime.device, device)
    try:
        perflog.emit(_start_record(cfg, ranks, device, plugin))
        try:
            for record in BENCHES[spec.bench](spec, device, ranks.rank):
                perflog.emit(record)
        except UnsupportedOnDevice as exc:
            exc.rank = ranks.rank
            raise
        perflog.emit(_end_record(ranks.rank, device))
    finally:
        if grouped:
            torch.distributed.destroy_process_group()


def _start_record(cfg: WorkerConfig, ranks: harness.Ranks, device: torch.device, plugin) -> perflog.StartRecord:
    environment = None
    if ranks.local_rank == 0:
        environment = {**node_environment(), **devices.environment(device),
                       "accelerator_kind": cfg.runtime.device.kind}
        variable = cfg.runtime.device.visible_devices_env
        if variable:
            environment["visible_devices"] = {variable: os.environ.get(variable)}
        if plugin is not None:
            environment.update(plugin.environment())
    return perflog.StartRecord(
        rank=ranks.rank, local_rank=ranks.local_rank, node_rank=ranks.node_rank, world_size=ranks.world_size,
        framework="torch", framework_version=torch.__version__, device=str(device), precision="n/a",
        n_params=0, flops_per_token=0.0, flop_formula=NO_MODEL_FORMULA, tokens_per_step=0,
        environment=environment, trainable_params=0, init_time_s=process_age_s())


def _end_record(rank: int, device: torch.device) -> perflog.EndRecord:
    """Peak memory as training rounds report it: the process's peak RSS on a CPU, the allocator's on a device."""
    if device.type == "cpu":
        return perflog.EndRecord(rank=rank, steps=0, peak_memory_bytes=harness._peak_rss(),
                                 memory_total_bytes=harness.memory_total_bytes(), memory_kind="rss")
    memory = devices.memory(device)
    return perflog.EndRecord(rank=rank, steps=0, peak_memory_bytes=memory.peak_allocated,
                             memory_total_bytes=memory.total, memory_kind="allocated",
                             peak_memory_reserved_bytes=memory.peak_reserved)


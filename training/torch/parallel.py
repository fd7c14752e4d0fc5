"""Map the strategy vocabulary (``ParallelSpec``, ``TrainSpec``) onto PyTorch's own machinery.

  data parallel          DistributedDataParallel
  sharding stage1        DDP + ZeroRedundancyOptimizer (optimizer state sharded: ZeRO-1)
  sharding stage2/3      FSDP2 ``fully_shard`` per block and at the root; stage2 keeps parameters
                         gathered between forward and backward (reshard_after_forward=False), stage3
                         frees them (True)
  offload                FSDP2 ``CPUOffloadPolicy``
  recompute              ``torch.utils.checkpoint`` around every block, or every k-th
  compile                ``torch.compile`` of each block (regional: compiles once, composes with FSDP)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from training.spec import TrainSpec, WorkloadSpec


class CheckpointedBlock(nn.Module):
    """Recomputes its block's activations in backward instead of keeping them."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


@dataclass
class Parallelized:
    model: nn.Module  # what forward and backward run on
    optimizer: torch.optim.Optimizer
    gradient_sync: Callable[[bool], ContextManager]  # off for all but the last micro-batch of a step


def apply_compile(blocks: nn.ModuleList, train: TrainSpec) -> None:
    if train.compile:
        for block in blocks:
            block.compile(mode=train.compile)


def apply_recompute(blocks: nn.ModuleList, train: TrainSpec) -> None:
    if train.recompute == "none":
        return
    every = 1 if train.recompute == "full" else train.recompute_every
    for index in range(len(blocks)):
        if index % every == 0:
            blocks[index] = CheckpointedBlock(blocks[index])


def _no_sync_never(enabled: bool) -> ContextManager:
    return contextlib.nullcontext()


def parallelize(model: nn.Module, spec: WorkloadSpec, world_size: int, device: torch.device) -> Parallelized:
    par, train = spec.parallel, spec.train
    apply_compile(model.blocks, train)
    apply_recompute(model.blocks, train)
    optimizer_args = {"lr": train.lr, "weight_decay": train.weight_decay}
    if world_size == 1:
        optimizer = torch.optim.AdamW(model.parameters(), fused=device.type == "cuda", **optimizer_args)
        return Parallelized(model, optimizer, _no_sync_never)
    if par.sharding in ("stage2", "stage3"):
        return _fsdp(model, par.sharding == "stage3", par.offload, world_size, device, optimizer_args)
    return _ddp(model, par.sharding == "stage1", device, optimizer_args)


def _ddp(model: nn.Module, zero1: bool, device: torch.device, optimizer_args: dict) -> Parallelized:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if zero1:
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, **optimizer_args)
    else:
        optimizer = torch.optim.AdamW(ddp.parameters(), fused=device.type == "cuda", **optimizer_args)

    def gradient_sync(enabled: bool) -> ContextManager:
        return contextlib.nullcontext() if enabled else ddp.no_sync()

    return Parallelized(ddp, optimizer, gradient_sync)


def _fsdp(model: nn.Module, reshard: bool, offload: bool, world_size: int, device: torch.device,
          optimizer_args: dict) -> Parallelized:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    mesh = init_device_mesh(device.type, (world_size,))
    # Pinned host memory speeds copies to a GPU, and needs one to exist.
    policy = CPUOffloadPolicy(pin_memory=device.type == "cuda") if offload else OffloadPolicy()
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, offload_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, offload_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), **optimizer_args)

    @contextlib.contextmanager
    def gradient_sync(enabled: bool):
        model.set_requires_gradient_sync(enabled)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)

    return Parallelized(model, optimizer, gradient_sync)

"""The PPO roles under the strategy vocabulary: the trained models as pretraining wraps them (DDP, ZeRO-1,
FSDP2 for stage2/3 with offload), the frozen ones replicated, or sharded too under stage3.
``debug.collective_delay_ms`` delays every DDP bucket's all-reduce and every FSDP all-gather and reduce-scatter
as in pretraining (ZeRO-1's parameter sync: in the breakdown updates only, training/torch/ppo_breakdown.py)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch
from torch import nn

from training.contract.spec import WorkloadSpec
from training.torch.breakdown import delay_fsdp, delay_hook
from training.torch.lora import trainable_parameters
from training.torch.parallel import _shard, apply_recompute, fused_adamw
from training.torch.ppo_models import Roles


@dataclass
class Trained:
    model: nn.Module  # what forward and backward run on
    plain: nn.Module  # the module itself (for generation)
    optimizer: torch.optim.Optimizer
    gathered: Callable[[], ContextManager]  # full parameters for calls that bypass the wrapper's forward


def _fsdp_gathered(model: nn.Module) -> Callable[[], ContextManager]:
    from torch.distributed.fsdp import FSDPModule

    @contextlib.contextmanager
    def gathered():
        modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
        for m in modules:
            m.unshard()
        try:
            yield
        finally:
            for m in modules:
                m.reshard()
    return gathered


def wrap(model: nn.Module, spec: WorkloadSpec, world: int, device: torch.device, lr: float) -> Trained:
    """One trained role on this rank's device, its optimizer over what trains."""
    from torch.nn.parallel import DistributedDataParallel

    apply_recompute(model.blocks, spec.train)
    args = {"lr": lr, "weight_decay": spec.train.weight_decay}
    sharding, delay_ms = spec.parallel.sharding, spec.debug.collective_delay_ms
    if world > 1 and sharding in ("stage2", "stage3"):
        _fsdp(model, spec, world, device)
        return Trained(model, model, torch.optim.AdamW(trainable_parameters(model), **args), _fsdp_gathered(model))
    wrapped = model
    if world > 1:
        wrapped = DistributedDataParallel(model, device_ids=None if device.type == "cpu" else [device.index])
        if delay_ms:
            wrapped.register_comm_hook(None, delay_hook(delay_ms))
    if world > 1 and sharding == "stage1":
        from torch.distributed.optim import ZeroRedundancyOptimizer  # only here: 0.4 s of CPU a rank to import

        optimizer = ZeroRedundancyOptimizer(trainable_parameters(model), optimizer_class=torch.optim.AdamW, **args)
    else:
        optimizer = torch.optim.AdamW(trainable_parameters(model), fused=fused_adamw(device), **args)
    return Trained(wrapped, model, optimizer, contextlib.nullcontext)


def wrap_frozen(model: nn.Module, spec: WorkloadSpec, world: int, device: torch.device) -> nn.Module:
    if world > 1 and spec.parallel.sharding == "stage3":
        _fsdp(model, spec, world, device)
    return model


def _fsdp(model: nn.Module, spec: WorkloadSpec, world: int, device: torch.device) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    _shard(model, init_device_mesh(device.type, (world,)), spec, device)
    if spec.debug.collective_delay_ms:  # every all-gather and reduce-scatter starts that much later
        delay_fsdp(model, spec.debug.collective_delay_ms)


def parallelize_roles(roles: Roles, spec: WorkloadSpec, world: int,
                      device: torch.device) -> tuple[Trained, Trained, Roles]:
    """Actor and critic wrapped with their optimizers; the roles as the loop calls them (wrapped)."""
    actor = wrap(roles.actor, spec, world, device, spec.train.lr)
    critic = wrap(roles.critic, spec, world, device, spec.train.lr)
    frozen = Roles(actor.model, critic.model, wrap_frozen(roles.initial, spec, world, device),
                   wrap_frozen(roles.reward, spec, world, device))
    return actor, critic, frozen

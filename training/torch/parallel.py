"""Map the strategy vocabulary (``ParallelSpec``, ``TrainSpec``) onto PyTorch's own machinery.

  tensor parallel        ``parallelize_module`` on a (data, tensor) DeviceMesh: q/k/v and the MLP's
                         input projections column-wise, both output projections row-wise (whole heads
                         per rank); embeddings, norms and the LM head stay replicated
  sequence parallel      with TP, the residual stream between blocks is split along the sequence: norms
                         run on each rank's slice (``SequenceParallel``), attention and MLP all-gather
                         their input and reduce-scatter their output (Megatron-LM's SP); the stream is
                         split before the first block and gathered again before the final norm
  data parallel          DistributedDataParallel (FSDP2 on the data sub-mesh when combined with TP)
  sharding stage1        DDP + ZeroRedundancyOptimizer (optimizer state sharded: ZeRO-1)
  sharding stage2/3      FSDP2 ``fully_shard`` per block and at the root; stage2 keeps parameters
                         gathered between forward and backward (reshard_after_forward=False), stage3
                         frees them (True)
  offload                FSDP2 ``CPUOffloadPolicy``
  pipeline parallel      ``torch.distributed.pipelining`` schedules over hand-built stages
                         (``training.torch.pipeline``), FSDP2 across pipelines on a (data, pipeline) mesh
  lora                   adapters on the frozen model (``training.torch.lora``), before any wrapping;
                         the optimizer sees only the adapters
  recompute              ``torch.utils.checkpoint`` around every block, or every k-th
  compile                ``torch.compile`` of each block (regional: compiles once, composes with FSDP)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager, Optional

import torch
from torch import nn
from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
from torch.utils.checkpoint import checkpoint

from training.torch.data import Batch
from training.spec import TrainSpec, WorkloadSpec
from training.torch.lora import trainable_parameters
from training.torch.pipeline import Pipeline, squared_norm
from training.torch.precision import Precision


class CheckpointedBlock(nn.Module):
    """Recomputes its block's activations in backward instead of keeping them."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


@dataclass
class Parallelized:
    model: nn.Module  # what forward and backward run on (unused under pipeline parallelism)
    optimizer: torch.optim.Optimizer
    gradient_sync: Callable[[bool], ContextManager]  # off for all but the last micro-batch of a step
    dp_rank: int = 0  # which slice of the global batch this rank trains on
    dp_size: int = 1
    model_parallel_size: int = 1  # ranks that share one slice (and so its tokens): tensor x pipeline
    shards_gradients: bool = False  # each rank holds only part of the gradients (FSDP, TP, PP)
    pipeline: Optional[Pipeline] = None

    @property
    def loss_copies(self) -> int:
        """Ranks that each hold a full copy of the loss of their slice: all but the pipelines' inner stages."""
        pp = self.pipeline.size if self.pipeline else 1
        return self.dp_size * self.model_parallel_size // pp

    def forward_backward(self, batches: list[Batch], scale: float, precision: Precision, scaler,
                         device: torch.device) -> torch.Tensor:
        """Forward and backward over one step's micro-batches; this rank's summed loss, each micro-batch's
        summed token losses times ``scale``."""
        if self.pipeline is not None:
            inputs = torch.cat([b.inputs for b in batches]).to(device)
            targets = torch.cat([b.targets for b in batches]).to(device)
            with precision.autocast():
                return self.pipeline.step(inputs, targets, scale, scaler)
        loss_sum = torch.zeros((), device=device)
        for micro, batch in enumerate(batches):
            inputs, targets = batch.inputs.to(device, non_blocking=True), batch.targets.to(device, non_blocking=True)
            with self.gradient_sync(micro == len(batches) - 1):
                with precision.autocast():
                    loss = self.model(inputs, targets, reduction="sum") * scale
                scaler.scale(loss).backward()
            loss_sum += loss.detach()
        return loss_sum

    def grad_norm(self, device: torch.device) -> float:
        """The global gradient norm, as one process would compute it (checks gradient scaling in tests)."""
        if self.pipeline is not None:
            return float(self.pipeline.squared_grad_norm().sqrt())
        grads = [p.grad for p in trainable_parameters(self.model) if p.grad is not None]
        return float(squared_norm(grads, device).sqrt())


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


def fused_adamw(device: torch.device) -> bool:
    """AdamW's fused kernel where the device has one; not on a CPU, so the parity tests' numerics stay put."""
    return device.type != "cpu" and device.type in _get_fused_kernels_supported_devices()


def _no_sync_never(enabled: bool) -> ContextManager:
    return contextlib.nullcontext()


def parallelize(model: nn.Module, spec: WorkloadSpec, world_size: int, rank: int,
                device: torch.device) -> Parallelized:
    par, train = spec.parallel, spec.train
    tp, pp = par.tensor_parallel_degree, par.pipeline_parallel_degree
    dp = world_size // (tp * pp)
    dp_mesh = None
    if pp > 1:
        apply_compile(model.blocks, train)
        apply_recompute(model.blocks, train)
        return _pipeline(model, spec, dp, rank, device)
    if tp > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
        apply_tensor_parallel(model, mesh["tp"], spec)
        dp_mesh = mesh["dp"]
    apply_compile(model.blocks, train)
    apply_recompute(model.blocks, train)
    # DTensor parameters (tensor parallel) need the per-parameter AdamW on CPU: foreach kernels reject them.
    optimizer_args = {"lr": train.lr, "weight_decay": train.weight_decay,
                      **({"foreach": False} if tp > 1 and device.type == "cpu" else {})}
    layout = {"dp_rank": rank // tp, "dp_size": dp, "model_parallel_size": tp, "shards_gradients": tp > 1}
    if dp == 1:
        optimizer = torch.optim.AdamW(trainable_parameters(model), fused=fused_adamw(device) and tp == 1,
                                      **optimizer_args)
        return Parallelized(model, optimizer, _no_sync_never, **layout)
    if par.sharding in ("stage2", "stage3"):
        return _fsdp(model, par.sharding == "stage3", par.offload, dp_mesh, dp, device, optimizer_args, layout)
    return _ddp(model, par.sharding == "stage1", device, optimizer_args, layout)


def apply_tensor_parallel(model: nn.Module, tp_mesh, spec: WorkloadSpec) -> None:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    sp = spec.parallel.sequence_parallel
    # Under SP the row-wise outputs are reduce-scattered along the sequence instead of all-reduced.
    out = RowwiseParallel(output_layouts=Shard(1)) if sp else RowwiseParallel()
    plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.proj": out, "mlp.fc": ColwiseParallel(), "mlp.proj": out}
    if spec.model.activation == "swiglu":
        plan["mlp.gate"] = ColwiseParallel()
    if sp:
        gather = {"input_layouts": (Shard(1), None, None), "desired_input_layouts": (Replicate(), None, None)}
        plan |= {"ln_1": SequenceParallel(), "ln_2": SequenceParallel(),
                 "attn": PrepareModuleInput(**gather), "mlp": PrepareModuleInput(
                     input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))}
    heads_per_rank = spec.model.n_head // tp_mesh.size()
    for block in model.blocks:
        parallelize_module(block, tp_mesh, plan)
        block.attn.head_offset = tp_mesh.get_local_rank() * heads_per_rank
    if sp:
        # The embeddings' output is split into sequence slices before the first block; the last block's
        # output is gathered back for the (replicated) final norm and LM head. DTensor redistribution
        # makes each of these the other's backward, so the replicated weights get full gradients.
        parallelize_module(model.blocks[0], tp_mesh, PrepareModuleInput(
            input_layouts=(Replicate(), None, None), desired_input_layouts=(Shard(1), None, None),
            use_local_output=True))
        parallelize_module(model.ln_f, tp_mesh, PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True))


def _ddp(model: nn.Module, zero1: bool, device: torch.device, optimizer_args: dict, layout: dict) -> Parallelized:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, device_ids=None if device.type == "cpu" else [device.index])
    if zero1:
        optimizer = ZeroRedundancyOptimizer(trainable_parameters(ddp), optimizer_class=torch.optim.AdamW, **optimizer_args)
    else:
        optimizer = torch.optim.AdamW(trainable_parameters(ddp), fused=fused_adamw(device), **optimizer_args)

    def gradient_sync(enabled: bool) -> ContextManager:
        return contextlib.nullcontext() if enabled else ddp.no_sync()

    return Parallelized(ddp, optimizer, gradient_sync, **layout)


def _shard(module: nn.Module, mesh, reshard: bool, offload: bool, device: torch.device) -> None:
    """FSDP2 on each block, then on the rest (embeddings, norms, head) at the root."""
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    # Pinned host memory speeds copies to an accelerator, and needs one to exist.
    policy = CPUOffloadPolicy(pin_memory=device.type != "cpu") if offload else OffloadPolicy()
    for block in module.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, offload_policy=policy)
    fully_shard(module, mesh=mesh, reshard_after_forward=reshard, offload_policy=policy)


def _pipeline(model: nn.Module, spec: WorkloadSpec, dp: int, rank: int, device: torch.device) -> Parallelized:
    """Pipeline stages on a (data, pipeline) mesh; data parallelism across pipelines is FSDP2."""
    from torch.distributed.device_mesh import init_device_mesh

    par, train = spec.parallel, spec.train
    pp = par.pipeline_parallel_degree
    mesh = init_device_mesh(device.type, (dp, pp), mesh_dim_names=("dp", "pp"))
    pp_rank, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()

    def wrap(stage: nn.Module) -> None:
        if dp > 1:
            _shard(stage, mesh["dp"], par.sharding == "stage3", par.offload, device)

    pipeline = Pipeline(model, spec, mesh["pp"].get_group(), pp_rank, dp_rank, dp, device, wrap)
    params = [p for p in pipeline.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=train.lr, weight_decay=train.weight_decay,
                                  fused=fused_adamw(device) and dp == 1)
    return Parallelized(model, optimizer, _no_sync_never, dp_rank=dp_rank, dp_size=dp, model_parallel_size=pp,
                        shards_gradients=True, pipeline=pipeline)


def _fsdp(model: nn.Module, reshard: bool, offload: bool, mesh, dp: int, device: torch.device,
          optimizer_args: dict, layout: dict) -> Parallelized:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = mesh if mesh is not None else init_device_mesh(device.type, (dp,))
    _shard(model, mesh, reshard, offload, device)
    optimizer = torch.optim.AdamW(trainable_parameters(model), **optimizer_args)

    @contextlib.contextmanager
    def gradient_sync(enabled: bool):
        model.set_requires_gradient_sync(enabled)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)

    return Parallelized(model, optimizer, gradient_sync, **{**layout, "shards_gradients": True})

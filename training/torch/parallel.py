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
  mixed precision        bf16/fp16: FSDP2 ``MixedPrecisionPolicy`` (gathers and computes in the low
                         precision, reduces gradients in fp32)
  pipeline parallel      ``torch.distributed.pipelining`` schedules over hand-built stages
                         (``training.torch.pipeline``), FSDP2 across pipelines on a (data, pipeline) mesh
  lora                   adapters on the frozen model (``training.torch.lora``), before any wrapping;
                         the optimizer sees only the adapters
  recompute              ``torch.utils.checkpoint`` around every block, or every k-th
  compile                ``torch.compile`` of each block (regional: compiles once, composes with FSDP);
                         instruction batches vary in width, so the sequence dimension is marked dynamic
                         and the one compile lands in the first step instead of a recompile in a later one

Every layout gets the model on the meta device and materialises it after wrapping it (``materialize``),
so no rank ever holds more of it than its share.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager, Optional

import torch
from torch import nn
from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
from torch.utils.checkpoint import checkpoint

from training.torch.data import Batch, as_tensors
from training.contract.spec import TrainSpec, WorkloadSpec
from training.torch.lora import trainable_parameters
from training.torch.pipeline import Pipeline, squared_norm
from training.torch.precision import Precision, fsdp_mixed_precision


class CheckpointedBlock(nn.Module):
    """Recomputes its block's activations in backward instead of keeping them."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


Materialize = Callable[[nn.Module, torch.device], None]  # allocate a wrapped meta module on a device, initialise


@dataclass
class Parallelized:
    model: Optional[nn.Module]  # what forward and backward run on (None under pipeline parallelism)
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
                         device: torch.device, sync_gradients: bool = True) -> torch.Tensor:
        """Forward and backward over one step's micro-batches; this rank's summed loss, each micro-batch's
        summed token losses times ``scale``. ``sync_gradients`` False: no gradient collective at all (the
        time breakdown's compute phase; DDP's ``no_sync`` on every micro-batch)."""
        if self.pipeline is not None:
            inputs = torch.cat([as_tensors(b)[0] for b in batches]).to(device)
            targets = torch.cat([as_tensors(b)[1] for b in batches]).to(device)
            with precision.autocast():
                return self.pipeline.step(inputs, targets, scale, scaler)
        loss_sum = torch.zeros((), device=device)
        for micro, batch in enumerate(batches):
            inputs, targets = (t.to(device, non_blocking=True) for t in as_tensors(batch))
            with self.gradient_sync(sync_gradients and micro == len(batches) - 1):
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


def apply_compile(model: nn.Module, train: TrainSpec, dynamic_width: bool) -> None:
    if train.compile:
        model.dynamic_width = dynamic_width  # widths vary per batch: one compile for all of them
        for block in model.blocks:
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


def init_device(spec: WorkloadSpec, device: torch.device) -> torch.device:
    """Where parameters live: on the CPU under offload (FSDP2 keeps the shards there), else the device."""
    return torch.device("cpu") if spec.parallel.offload else device


def parallelize(model: nn.Module, spec: WorkloadSpec, world_size: int, rank: int,
                device: torch.device, materialize: Materialize) -> Parallelized:
    """Wrap ``model`` (on the meta device) for the layout, then materialise this rank's part of it."""
    par, train = spec.parallel, spec.train
    tp, pp = par.tensor_parallel_degree, par.pipeline_parallel_degree
    dp = world_size // (tp * pp)
    dp_mesh = None
    if pp > 1:
        apply_compile(model, train, dynamic_width=False)  # a pipeline pads every batch to seq_len
        apply_recompute(model.blocks, train)
        return _pipeline(model, spec, dp, rank, device, materialize)
    if tp > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
        apply_tensor_parallel(model, mesh["tp"], spec)
        dp_mesh = mesh["dp"]
    apply_compile(model, train, dynamic_width=spec.data.instruction)
    apply_recompute(model.blocks, train)
    # DTensor parameters (tensor parallel) need the per-parameter AdamW on CPU: foreach kernels reject them.
    optimizer_args = {"lr": train.lr, "weight_decay": train.weight_decay,
                      **({"foreach": False} if tp > 1 and device.type == "cpu" else {})}
    layout = {"dp_rank": rank // tp, "dp_size": dp, "model_parallel_size": tp, "shards_gradients": tp > 1}
    if dp == 1:
        materialize(model, device)
        optimizer = torch.optim.AdamW(trainable_parameters(model), fused=fused_adamw(device) and tp == 1,
                                      **optimizer_args)
        return Parallelized(model, optimizer, _no_sync_never, **layout)
    if par.sharding in ("stage2", "stage3"):
        _shard(model, dp_mesh or _dp_mesh(device, dp), spec, device)
        materialize(model, init_device(spec, device))
        if spec.debug.collective_delay_ms:  # every all-gather and reduce-scatter starts that much later
            from training.torch.breakdown import delay_fsdp

            delay_fsdp(model, spec.debug.collective_delay_ms)
        return _fsdp(model, par.sync_gradients_each_micro_batch, optimizer_args, layout)
    materialize(model, device)  # DDP wraps (and broadcasts) real parameters
    return _ddp(model, par.sharding == "stage1", device, optimizer_args, layout, spec.debug.collective_delay_ms)


def _dp_mesh(device: torch.device, dp: int):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device.type, (dp,))


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


def _ddp(model: nn.Module, zero1: bool, device: torch.device, optimizer_args: dict, layout: dict,
         delay_ms: Optional[float] = None) -> Parallelized:
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, device_ids=None if device.type == "cpu" else [device.index])
    if delay_ms:  # debug.collective_delay_ms: every bucket's all-reduce starts that much later
        from training.torch.breakdown import delay_hook

        ddp.register_comm_hook(None, delay_hook(delay_ms))
    if zero1:  # imported only here: torch.distributed.optim costs each rank 0.4 s of CPU to import
        from torch.distributed.optim import ZeroRedundancyOptimizer

        optimizer = ZeroRedundancyOptimizer(trainable_parameters(ddp), optimizer_class=torch.optim.AdamW, **optimizer_args)
    else:
        optimizer = torch.optim.AdamW(trainable_parameters(ddp), fused=fused_adamw(device), **optimizer_args)

    def gradient_sync(enabled: bool) -> ContextManager:
        return contextlib.nullcontext() if enabled else ddp.no_sync()

    return Parallelized(ddp, optimizer, gradient_sync, **layout)


def _shard(module: nn.Module, mesh, spec: WorkloadSpec, device: torch.device) -> None:
    """FSDP2 on each block, then on the rest (embeddings, norms, head) at the root."""
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    # Pinned host memory speeds copies to an accelerator, and needs one to exist.
    policy = CPUOffloadPolicy(pin_memory=device.type != "cpu") if spec.parallel.offload else OffloadPolicy()
    options = {"mesh": mesh, "reshard_after_forward": spec.parallel.sharding == "stage3", "offload_policy": policy,
               "mp_policy": fsdp_mixed_precision(spec.train.precision)}
    for block in module.blocks:
        fully_shard(block, **options)
    fully_shard(module, **options)


def _pipeline(model: nn.Module, spec: WorkloadSpec, dp: int, rank: int, device: torch.device,
              materialize: Materialize) -> Parallelized:
    """Pipeline stages on a (data, pipeline) mesh; data parallelism across pipelines is FSDP2."""
    from torch.distributed.device_mesh import init_device_mesh

    par, train = spec.parallel, spec.train
    pp = par.pipeline_parallel_degree
    mesh = init_device_mesh(device.type, (dp, pp), mesh_dim_names=("dp", "pp"))
    pp_rank, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()

    def prepare(stage: nn.Module) -> None:
        if dp > 1:
            _shard(stage, mesh["dp"], spec, device)
        materialize(stage, init_device(spec, device) if dp > 1 else device)

    # Only the stages' modules are materialised: the rest of ``model`` stays on the meta device, unreferenced.
    pipeline = Pipeline(model, spec, mesh["pp"].get_group(), pp_rank, dp_rank, dp, device, prepare)
    params = [p for p in pipeline.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=train.lr, weight_decay=train.weight_decay,
                                  fused=fused_adamw(device) and dp == 1)
    return Parallelized(None, optimizer, _no_sync_never, dp_rank=dp_rank, dp_size=dp, model_parallel_size=pp,
                        shards_gradients=True, pipeline=pipeline)


def _fsdp(model: nn.Module, sync_each_micro_batch: bool, optimizer_args: dict, layout: dict) -> Parallelized:
    """``model`` already sharded and materialised."""
    optimizer = torch.optim.AdamW(trainable_parameters(model), **optimizer_args)
    if sync_each_micro_batch:  # reduce-scatter every micro-batch: only gradient shards are ever kept
        return Parallelized(model, optimizer, _no_sync_never, **{**layout, "shards_gradients": True})

    @contextlib.contextmanager
    def gradient_sync(enabled: bool):
        model.set_requires_gradient_sync(enabled)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)

    return Parallelized(model, optimizer, gradient_sync, **{**layout, "shards_gradients": True})

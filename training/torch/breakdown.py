"""The PyTorch worker's phases for the time breakdown (``training/breakdown.py``), and the DDP comm hook of
``debug.collective_delay_ms``.

Covered: one process (no collective); DDP (sharding none) and ZeRO-1 (stage1): compute under ``no_sync``,
then the gradients all-reduced explicitly, in buckets of DDP's own sizes (reverse parameter order), each
waited for; ZeRO-1's parameter broadcasts in its optimizer step timed apart (``Collectives``); FSDP2
(stage2/3): its own all-gathers and reduce-scatters, inside forward and backward, each timed apart through
FSDP2's public custom-collective hooks (``set_custom_all_gather``/``set_custom_reduce_scatter``); tensor
parallel (alone or beside FSDP2): DTensor's collectives, in forward, backward and the optimizer step, each
timed apart where it calls the functional collectives (``training/torch/breakdown_tp.py``). Pipeline
parallelism runs its collectives inside the schedule's own code, which has no such hook: its breakdown says
"not measured".
"""
from __future__ import annotations

import re
import time
from typing import Callable, Optional, Union

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from training.breakdown import Collectives, Phases
from training.faults import sleep_ms
from training.torch import breakdown_tp
from training.torch.lora import trainable_parameters


def uncovered(spec, parallel) -> Optional[str]:
    """Why this layout has no breakdown, or None (tensor parallel: ``breakdown_tp.uncovered``)."""
    if parallel.pipeline is not None:
        return "not measured for pipeline parallel"
    return None


def bucket_sizes(ddp, cap_bytes: int) -> list[int]:
    """DDP's own bucket sizes in bytes (its logging data, after it rebuilt them in gradient-ready order at the
    first step); ``[cap_bytes]`` where it does not say."""
    try:
        sizes = [int(x) for x in re.findall(r"\d+", str(ddp._get_ddp_logging_data().get("bucket_sizes", "")))]
    except (AttributeError, RuntimeError):
        sizes = []
    return sizes or [cap_bytes]


def buckets(params: list[torch.nn.Parameter], sizes: list[int]) -> list[list[torch.Tensor]]:
    """The gradients in DDP's order (reverse registration) cut into buckets of DDP's sizes: a bucket closes
    once it holds its size (the last size repeats)."""
    out: list[list[torch.Tensor]] = [[]]
    held = 0
    for p in reversed(params):
        if p.grad is None:
            continue
        out[-1].append(p.grad)
        held += p.grad.numel() * p.grad.element_size()
        if held >= sizes[min(len(out), len(sizes)) - 1]:
            out.append([])
            held = 0
    return [b for b in out if b]


def _timed_fsdp(model, run: Callable) -> None:
    """Every FSDP2 module's all-gather and reduce-scatter through ``run(op, bytes, call)``: nccl-tests' message
    size is the gathered whole (all-gather) and the scattered whole (reduce-scatter)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

    class Gather(DefaultAllGather):
        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            return run("allgather", output_tensor.numel() * output_tensor.element_size(),
                       lambda: DefaultAllGather.__call__(self, output_tensor, input_tensor, group, async_op))

    class Scatter(DefaultReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            return run("reducescatter", input_tensor.numel() * input_tensor.element_size(),
                       lambda: DefaultReduceScatter.__call__(self, output_tensor, input_tensor, group, op, async_op))

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_custom_all_gather(Gather())
            module.set_custom_reduce_scatter(Scatter())


def delay_fsdp(model, delay_ms: float) -> None:
    """``debug.collective_delay_ms`` on FSDP2's all-gathers and reduce-scatters (the measured steps)."""
    def run(op: str, nbytes: int, call):
        time.sleep(delay_ms / 1000)
        return call()

    _timed_fsdp(model, run)


def _waited(call):
    work = call()
    if hasattr(work, "wait"):  # an async work handle: the collective's time includes its completion
        work.wait()
    return work


def phases(worker) -> Union[Phases, str]:
    """``worker``: a TorchWorker after its measured steps."""
    spec, parallel = worker.spec, worker.parallel
    tp = spec.parallel.tensor_parallel_degree > 1
    why = uncovered(spec, parallel) or (breakdown_tp.uncovered(spec, worker.on_cpu) if tp else None)
    if why:
        return why
    debug, sharding = spec.debug, spec.parallel.sharding
    fsdp = parallel.dp_size > 1 and sharding in ("stage2", "stage3")
    inner = None
    if parallel.dp_size > 1 or tp:
        inner = Collectives(lambda: None if worker.on_cpu else worker.synchronize(), dist.barrier,
                            debug.collective_delay_ms)
    if fsdp:
        _timed_fsdp(parallel.model, lambda op, nbytes, call: inner.run(op, nbytes, lambda: _waited(call)))
    elif parallel.dp_size > 1 and sharding == "stage1":
        optimizer, sync_params = parallel.optimizer, parallel.optimizer._sync_params
        nbytes = sum(p.numel() * p.element_size() for p in trainable_parameters(parallel.model))
        # ZeroRedundancyOptimizer.step() = its local step, then self._sync_params(): each owner broadcasts
        # its updated shard; timed as one broadcast of every trainable parameter's bytes
        optimizer._sync_params = lambda: inner.run("broadcast", nbytes, sync_params)

    forward_backward = parallel.forward_backward
    if tp:  # DTensor's collectives: in forward and backward, and (sequence parallel) in the optimizer step
        timed = breakdown_tp.timed(inner, breakdown_tp.tensor_parallel_group(parallel.model))
        forward_backward = timed(forward_backward)

    def compute(batches: list) -> None:
        scale = worker.loss_scale(batches)  # the global count's all-reduce: compute, not data_s
        worker.compute_delay()
        # FSDP: its reduce-scatters run in backward, each timed apart by ``inner``
        forward_backward(batches, scale, worker.precision, worker.scaler, worker.torch_device, sync_gradients=fsdp)

    def communicate() -> list[int]:
        if parallel.dp_size == 1 or fsdp:
            return []
        sizes = []
        limits = bucket_sizes(parallel.model, getattr(parallel.model, "bucket_bytes_cap", 25 << 20))
        for grads in buckets(list(trainable_parameters(parallel.model)), limits):
            flat = _flatten_dense_tensors(grads)
            sleep_ms(debug.collective_delay_ms)
            dist.all_reduce(flat)
            flat /= parallel.dp_size
            for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads)):
                grad.copy_(reduced)
            sizes.append(flat.numel() * flat.element_size())
        return sizes

    def optimize() -> None:
        worker.scaler.step(parallel.optimizer)
        worker.scaler.update()

    def align() -> None:
        if parallel.dp_size > 1:
            dist.barrier()

    if tp:
        optimize = timed(optimize)
    return Phases(fetch=worker.fetch, compute=compute, communicate=communicate, optimize=optimize, align=align,
                  finish=lambda: parallel.optimizer.zero_grad(set_to_none=True), group_size=parallel.dp_size,
                  inner=inner)


def delay_hook(delay_ms: float):
    """A DDP comm hook: ``delay_ms``, then DDP's own all-reduce of the bucket (``debug.collective_delay_ms``)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(state, bucket):
        time.sleep(delay_ms / 1000)
        return allreduce_hook(state, bucket)

    return hook


"""The PyTorch worker's phases for the time breakdown (``training/breakdown.py``), and the DDP comm hook of
``debug.collective_delay_ms``.

Covered: one process (no collective), and DDP (sharding none): compute under ``no_sync``, then the gradients
all-reduced explicitly, in buckets of DDP's own sizes (reverse parameter order), each waited for. Other layouts collect their gradients inside forward and backward (FSDP, tensor and pipeline
parallelism) or in the optimizer (ZeRO-1's parameter broadcast), where this method cannot separate them:
their breakdown says "not measured for <strategy>".
"""
from __future__ import annotations

import re
import time
from typing import Optional, Union

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from training.breakdown import Phases
from training.faults import sleep_ms
from training.torch.lora import trainable_parameters


def uncovered(spec, parallel) -> Optional[str]:
    """Why this layout has no breakdown, or None."""
    par = spec.parallel
    if parallel.pipeline is not None:
        return "not measured for pipeline parallel"
    if par.tensor_parallel_degree > 1:
        return "not measured for tensor parallel"
    if parallel.dp_size > 1 and par.sharding != "none":
        return f"not measured for sharding {par.sharding}"
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


def phases(worker) -> Union[Phases, str]:
    """``worker``: a TorchWorker after its measured steps."""
    spec, parallel = worker.spec, worker.parallel
    why = uncovered(spec, parallel)
    if why:
        return why
    debug = spec.debug

    def compute(step: tuple) -> None:
        batches, scale = step
        worker.compute_delay()
        parallel.forward_backward(batches, scale, worker.precision, worker.scaler, worker.torch_device,
                                  sync_gradients=False)

    def communicate() -> list[int]:
        if parallel.dp_size == 1:
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

    return Phases(fetch=worker.fetch, compute=compute, communicate=communicate, optimize=optimize, align=align,
                  finish=lambda: parallel.optimizer.zero_grad(set_to_none=True), group_size=parallel.dp_size)


def delay_hook(delay_ms: float):
    """A DDP comm hook: ``delay_ms``, then DDP's own all-reduce of the bucket (``debug.collective_delay_ms``)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(state, bucket):
        time.sleep(delay_ms / 1000)
        return allreduce_hook(state, bucket)

    return hook


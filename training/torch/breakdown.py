"""The PyTorch worker's phases for the time breakdown (``training/breakdown.py``), and the DDP comm hook of
``debug.collective_delay_ms``.

Covered: one process (no collective); DDP (sharding none) and ZeRO-1 (stage1): compute under ``no_sync``,
then the gradients all-reduced explicitly, in buckets of DDP's own sizes (reverse parameter order), each
waited for; ZeRO-1's parameter broadcasts in its optimizer step timed apart (``Collectives``); FSDP2
(stage2/3): its own all-gathers and reduce-scatters, inside forward and backward, each timed apart through
FSDP2's public custom-collective hooks (``set_custom_all_gather``/``set_custom_reduce_scatter``); tensor
parallel (alone or beside FSDP2): DTensor's collectives, in forward, backward and the optimizer step, each
timed apart where it calls the functional collectives (``training/torch/breakdown_tp.py``); pipeline
parallel: its own clock on the schedule (``training/torch/breakdown_pp.py``). PPO's roles are wrapped the
same ways, and its breakdown (ppo_breakdown.py) times them with the same helpers: ``all_reduce_buckets``,
``time_fsdp``, ``time_zero1``.
"""
from __future__ import annotations

import re
import time
from typing import Callable, Optional, Union

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from training import harness
from training.breakdown import Collectives, Phases
from training.faults import sleep_ms
from training.torch import breakdown_pp
from training.torch import breakdown_tp
from training.torch.lora import trainable_parameters


def uncovered(spec, parallel) -> Optional[str]:
    """Why this layout has no breakdown, or None (tensor parallel: ``breakdown_tp.uncovered``)."""
    if parallel.pipeline is not None and spec.parallel.tensor_parallel_degree > 1:
        return ("not measured for pipeline x tensor parallel: DTensor's collectives run inside the chunks the "
                "pipeline's clock times as compute")
    if parallel.pipeline is not None:
        return breakdown_pp.uncovered(parallel)
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


def time_fsdp(model, inner: Collectives) -> None:
    """Every all-gather and reduce-scatter of FSDP2 ``model`` timed one by one through ``inner``."""
    _timed_fsdp(model, lambda op, nbytes, call: inner.run(op, nbytes, lambda: _waited(call)))


def time_zero1(model, optimizer, inner: Collectives) -> None:
    """ZeroRedundancyOptimizer.step() = its local step, then self._sync_params(): each owner broadcasts its
    updated shard; timed through ``inner`` as one broadcast of every trainable parameter's bytes."""
    sync_params = optimizer._sync_params
    nbytes = sum(p.numel() * p.element_size() for p in trainable_parameters(model))
    optimizer._sync_params = lambda: inner.run("broadcast", nbytes, sync_params)


def all_reduce_buckets(ddp, dp_size: int, delay_ms: Optional[float]) -> list[int]:
    """The gradients of DDP-wrapped ``ddp`` (computed under ``no_sync``) all-reduced explicitly and averaged,
    bucket by bucket in DDP's sizes and order, each waited for (``delay_ms`` before each); their bytes."""
    sizes = []
    for grads in buckets(list(trainable_parameters(ddp)), bucket_sizes(ddp, getattr(ddp, "bucket_bytes_cap",
                                                                                     25 << 20))):
        flat = _flatten_dense_tensors(grads)
        sleep_ms(delay_ms)
        dist.all_reduce(flat)
        flat /= dp_size
        for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            grad.copy_(reduced)
        sizes.append(flat.numel() * flat.element_size())
    return sizes


def _waited(call):
    work = call()
    if hasattr(work, "wait"):  # an async work handle: the collective's time includes its completion
        work.wait()
    return work


def leaves_model(spec, parallel) -> bool:
    """Whether ``phases`` installs nothing on the model that would stay for later steps: one process and DDP
    (the breakdown's all-reduces are its own calls). FSDP2's hooks, ZeRO-1's patched broadcast, tensor
    parallel's and a pipeline's clocks stay: their breakdown runs after the measured steps."""
    return (parallel.pipeline is None and spec.parallel.tensor_parallel_degree == 1
            and (parallel.dp_size == 1 or spec.parallel.sharding == "none"))


def phases(worker) -> Union[Phases, str]:
    """``worker``: a TorchWorker after its first steps (DDP has rebuilt its buckets)."""
    spec, parallel = worker.spec, worker.parallel
    tp = spec.parallel.tensor_parallel_degree > 1
    why = uncovered(spec, parallel) or (breakdown_tp.uncovered(spec, worker.on_cpu) if tp else None)
    if why:
        return why
    if parallel.pipeline is not None:  # its own clock on the schedule
        return breakdown_pp.phases(worker)
    debug, sharding = spec.debug, spec.parallel.sharding
    fsdp = parallel.dp_size > 1 and sharding in ("stage2", "stage3")
    inner = None
    if parallel.dp_size > 1 or tp:
        inner = Collectives(lambda: None if worker.on_cpu else worker.synchronize(), dist.barrier,
                            debug.collective_delay_ms)
    if fsdp:
        time_fsdp(parallel.model, inner)
    elif parallel.dp_size > 1 and sharding == "stage1":
        time_zero1(parallel.model, parallel.optimizer, inner)

    forward_backward = parallel.forward_backward
    if tp:  # DTensor's collectives: in forward and backward, and (sequence parallel) in the optimizer step
        timed = breakdown_tp.timed(inner, breakdown_tp.tensor_parallel_group(parallel.model))
        forward_backward = timed(forward_backward)

    def compute(batches: list) -> harness.StepWork:
        worker.compiles.step_started()  # a step for the compile count, as train_step's (the warm-up's, here)
        scale = worker.loss_scale(batches)  # the global count's all-reduce: compute, not data_s
        worker.compute_delay()
        # FSDP: its reduce-scatters run in backward, each timed apart by ``inner``
        loss = forward_backward(batches, scale, worker.precision, worker.scaler, worker.torch_device,
                                sync_gradients=fsdp)
        return harness.StepWork(loss=loss, **worker.counts(batches))

    def communicate() -> list[int]:
        if parallel.dp_size == 1 or fsdp:
            return []
        return all_reduce_buckets(parallel.model, parallel.dp_size, debug.collective_delay_ms)

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


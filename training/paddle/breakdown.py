"""The Paddle worker's phases for the time breakdown (``training/breakdown.py``).

Covered: one process (no collective), plain data parallel (fleet's ``paddle.DataParallel``), tensor parallel
alone on a CPU (fleet's mpu layers, with or without sequence parallelism) and sharding stage1 (fleet's
``DygraphShardingOptimizer``) over the whole data group or with data parallelism beside it; stage2
(``group_sharded_parallel``, level ``os_g``) over the whole data group takes the same path but runs on GPU/XPU
only, so only its stage1 form is proven here. Data parallel's explicit path is the torch worker's: every
micro-batch's forward and backward under ``DataParallel.no_sync`` (its C++ reducer stays idle), then the
gradients all-reduced from Python in the reducer's own buckets: ``DataParallel.group_indices``
(``core.eager_assign_group_by_size`` over the reducer's parameter list, fleet's ``fuse_grad_size_in_MB`` and the
smaller last bucket), issued in the reducer's order (reversed), each bucket flattened, summed over the data
group, divided by the group's size (the reducer's average) and copied back. ``debug.collective_delay_ms``
sleeps before each of those all-reduces: Paddle's reducer has no comm hook, so on Paddle the delay is in the
breakdown steps only.

Fleet's own collectives (``fleet_phases``): tensor parallel (alone, sequence parallel included) and sharding
stage1, over the whole data group or with data parallelism beside it, run their collectives inside Paddle's
code: in forward and backward (fleet's mpu layers' PyLayers), in the optimizer step (the sharding optimizer's
reduces and broadcasts, the data-parallel group's all-reduce of each sharding rank's own gradients, tensor
parallel's parameter sync). Paddle offers no hook for any of them, but every one is a call of a method of the
group's process group, looked up by name on each use. For the breakdown steps' forward+backward and optimizer
step only, ``training/paddle/breakdown_collectives.py`` swaps those methods for wrappers that time each call
through ``Collectives.run`` (a barrier over that collective's own group, timed as wait,
``debug.collective_delay_ms``, the call waited for, timed as communication) and record its nccl-tests operation,
message size and group size; it says what Paddle 3.3.1 calls where, and how a collective that bypasses the
wrappers makes the record "not measured". Sharding stage1 per optimizer step (fleet's defaults: no
``tensor_fusion``, no ``comm_overlap``, ``split_param`` off so not V2): per trainable parameter
``paddle.distributed.reduce(grad, dst=owner)`` over the sharding group (AVG where NCCL has it, else the
gradient scaled by 1/n and summed, as on gloo); with data parallelism beside it one all-reduce per 128 MB of this
rank's own gradients over the data-parallel group; the owner's local optimizer step; per trainable parameter
``paddle.distributed.broadcast(param, src=owner, sync_op=False)`` over the sharding group, waited for in turn
here. Stage2 (``group_sharded_parallel``, GPU/XPU only: Paddle refuses it on a CPU) calls the same functions in
its backward hooks (a reduce of each full gradient bucket) and optimizer (a broadcast of each parameter buffer)
and takes the same path over the whole data group, but only stage1 is proven here (CPU). With fp16/bf16 (an
accelerator) the loss scaler's found-inf all-reduce in the optimizer step is recorded as a 4-byte all-reduce.
nccl-tests' ``reduce`` (busbw = algbw, bus factor 1) prices the reduces: the ``reduce`` micro case
(``training/micro``) measures it.

Not covered, with why (``uncovered``): pipeline parallel (the schedule's sends and receives); tensor parallel on
an accelerator (``ParallelCrossEntropy``'s C++ kernel all-reduces inside itself, past any Python wrapper; on a
CPU its Python equivalent is timed); tensor parallel with data parallelism or sharding beside it, and sharding
stage2 beside data parallelism (the same wrappers would see their collectives, but no run here has checked
them); sharding stage3 (GPU/XPU only: its parameter all-gathers, issued ahead of use by its prefetch, have not
been run here).
"""
from __future__ import annotations

from typing import Union

import paddle
import paddle.distributed as dist

from training.breakdown import Collectives, Phases
from training.faults import sleep_ms
from training.paddle import breakdown_collectives as collectives


def uncovered(layout, sharding: str, on_cpu: bool = True) -> str | None:
    """Why a Paddle layout has no measured breakdown, or None; ``sharding``: ``parallel.sharding``."""
    if layout.pp > 1:
        return ("not measured for pipeline parallel on paddle: its sends and receives run inside fleet's "
                "pipeline schedule")
    if layout.tp > 1 and (layout.dp > 1 or layout.sharding > 1):
        return (f"not measured for tensor parallel with data parallelism or sharding beside it on paddle (tensor-"
                f"parallel degree {layout.tp}, data-parallel {layout.dp}, sharding {layout.sharding}): the "
                "process-group wrappers would see its collectives, but no run here has checked that layout")
    if layout.tp > 1 and not on_cpu:
        return ("not measured for tensor parallel on paddle on an accelerator: ParallelCrossEntropy's C++ kernel "
                "(c_softmax_with_cross_entropy) all-reduces the logits' max, the target logit and the sum of "
                "exponentials inside itself, 3 all-reduces per micro-batch that no Python wrapper can time (on a "
                "CPU its Python equivalent's are timed)")
    if layout.sharding > 1 and sharding == "stage3":
        return ("not measured for sharding stage3 on paddle: it runs on GPU/XPU only, and its parameter "
                "all-gathers (group_sharded_stage3's _all_gather, issued ahead of use by its prefetch) have not "
                "been timed on a run here")
    if layout.sharding > 1 and layout.dp > 1 and sharding != "stage1":
        return (f"not measured for sharding {sharding} with data parallel beside it on paddle (sharding degree "
                f"{layout.sharding}, data-parallel degree {layout.dp}): group_sharded_parallel runs on GPU/XPU "
                "only, and that layout has not been run here")
    return None


def reducer_parameters(model) -> list:
    """``DataParallel.init_reducer``'s parameter list, the one ``group_indices`` indexes: every sublayer's own
    trainable parameters once, in sublayer order, without those marked ``no_sync``."""
    seen, out = set(), []
    for sublayer in model.sublayers():
        for _, param in sublayer.named_parameters(include_sublayers=False):
            if param is None or id(param) in seen:
                continue
            seen.add(id(param))
            if param.trainable and not getattr(param, "no_sync", False):
                out.append(param)
    return out


def all_reduce_buckets(params: list, group_indices: list[list[int]], group, size: int,
                       delay_ms=None) -> list[int]:
    """The reducer's all-reduces done explicitly: each bucket (reversed ``group_indices``) flattened, summed
    over ``group``, averaged over ``size`` and copied back into its gradients; the bytes of each."""
    sizes = []
    for indices in reversed(group_indices):
        grads = [params[i].grad for i in indices if params[i].grad is not None]
        if not grads:
            continue
        flat = paddle.concat([g.flatten() for g in grads])
        sleep_ms(delay_ms)
        dist.all_reduce(flat, group=group)
        flat = flat / size
        for grad, reduced in zip(grads, paddle.split(flat, [int(g.size) for g in grads])):
            paddle.assign(reduced.reshape(grad.shape), output=grad)
        sizes.append(int(flat.size) * flat.element_size())
    return sizes


def fleet_phases(worker) -> Phases:
    """Tensor parallel, or sharding stage1 (stage2 on an accelerator) with or without data parallelism beside
    it: no explicit communication phase; compute (forward and backward) and the optimizer step each with every
    collective fleet issues timed one by one (training/paddle/breakdown_collectives.py)."""
    layout, debug = worker.layout, worker.spec.debug
    # a CPU runs each operation before returning (and Paddle refuses to synchronise one)
    inner = Collectives(lambda: None if worker.on_cpu else worker.synchronize(), dist.barrier,
                        debug.collective_delay_ms)
    device_id = None if worker.on_cpu else paddle.framework._current_expected_place().get_device_id()
    timed = collectives.timed(inner, collectives.process_group_classes(worker.hcg), device_id)
    forward_backward = timed(worker.forward_backward)

    def compute(batches: list) -> None:
        scale = worker.loss_scale(batches)  # the global count's all-reduce: compute, not one of fleet's
        worker.compute_delay()
        forward_backward(batches, scale, sync=False)

    return Phases(fetch=worker.fetch, compute=compute, communicate=list, optimize=timed(worker.optimizer_step),
                  align=dist.barrier, finish=worker.optimizer.clear_grad, group_size=layout.data, inner=inner)


def phases(worker) -> Union[Phases, str]:
    """``worker``: a PaddleWorker after its measured steps."""
    layout = worker.layout
    why = uncovered(layout, worker.spec.parallel.sharding, worker.on_cpu) if worker.world > 1 else None
    if why:
        return why
    if worker.world > 1 and (layout.sharding > 1 or layout.tp > 1):
        return fleet_phases(worker)
    model, debug = worker.model, worker.spec.debug
    data_parallel = worker.world > 1
    if data_parallel and not hasattr(model, "group_indices"):
        return f"not measured for data parallel on paddle: the model is a {type(model).__name__}, not DataParallel"
    params = reducer_parameters(model) if data_parallel else []
    group = getattr(model, "group", None)

    def compute(batches: list) -> None:
        scale = worker.loss_scale(batches)  # the global count's all-reduce: compute, not data_s
        worker.compute_delay()
        worker.forward_backward(batches, scale, sync=False)

    def communicate() -> list[int]:
        if not data_parallel:
            return []
        return all_reduce_buckets(params, model.group_indices, group, layout.data, debug.collective_delay_ms)

    def align() -> None:
        if data_parallel:
            dist.barrier(group=group)

    return Phases(fetch=worker.fetch, compute=compute, communicate=communicate, optimize=worker.optimizer_step,
                  align=align, finish=worker.optimizer.clear_grad, group_size=layout.data if data_parallel else 1)

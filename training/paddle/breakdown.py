"""The Paddle worker's phases for the time breakdown (``training/breakdown.py``).

Covered: one process (no collective) and plain data parallel (fleet's ``paddle.DataParallel``). Data
parallel's explicit path is the torch worker's: every micro-batch's forward and backward under
``DataParallel.no_sync`` (its C++ reducer stays idle), then the gradients all-reduced from Python in the
reducer's own buckets: ``DataParallel.group_indices`` (``core.eager_assign_group_by_size`` over the
reducer's parameter list, fleet's ``fuse_grad_size_in_MB`` and the smaller last bucket), issued in the
reducer's order (reversed), each bucket flattened, summed over the data group, divided by the group's size
(the reducer's average) and copied back. ``debug.collective_delay_ms`` sleeps before each of those
all-reduces: Paddle's reducer has no comm hook, so on Paddle the delay is in the breakdown steps only.

Not covered, with why (``uncovered``): tensor parallel (fleet's mpu layers all-reduce inside their forward
and backward), pipeline parallel (the schedule's sends and receives) and sharding (stage1's reduces and
broadcasts inside fleet's sharding optimizer step, stage2/3's inside group_sharded_parallel's hooks).
"""
from __future__ import annotations

from typing import Union

import paddle
import paddle.distributed as dist

from training.breakdown import Phases
from training.faults import sleep_ms


def uncovered(layout) -> str | None:
    """Why a Paddle layout has no measured breakdown, or None."""
    if layout.pp > 1:
        return ("not measured for pipeline parallel on paddle: its sends and receives run inside fleet's "
                "pipeline schedule")
    if layout.tp > 1:
        return ("not measured for tensor parallel on paddle: its all-reduces run inside fleet's mpu layers' "
                "forward and backward, which offer no hook to time them one by one")
    if layout.sharding > 1:
        return ("not measured for sharding on paddle: its reduce-scatters and all-gathers run inside "
                "group_sharded_parallel's backward hooks and optimizer step (stage1: fleet's sharding "
                "optimizer's reduces and broadcasts), which offer no hook to time them one by one")
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


def phases(worker) -> Union[Phases, str]:
    """``worker``: a PaddleWorker after its measured steps."""
    layout = worker.layout
    why = uncovered(layout) if worker.world > 1 else None
    if why:
        return why
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

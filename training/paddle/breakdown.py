"""The Paddle worker's phases for the time breakdown (``training/breakdown.py``).

Covered: one process (no collective), plain data parallel (fleet's ``paddle.DataParallel``) and sharding
stage1 (fleet's ``DygraphShardingOptimizer``) on the whole data group; stage2 (``group_sharded_parallel``,
level ``os_g``) takes the same path but runs on GPU/XPU only, so only its stage1 form is proven here. Data
parallel's explicit path is the torch worker's: every micro-batch's forward and backward under
``DataParallel.no_sync`` (its C++ reducer stays idle), then the gradients all-reduced from Python in the
reducer's own buckets: ``DataParallel.group_indices`` (``core.eager_assign_group_by_size`` over the
reducer's parameter list, fleet's ``fuse_grad_size_in_MB`` and the smaller last bucket), issued in the
reducer's order (reversed), each bucket flattened, summed over the data group, divided by the group's size
(the reducer's average) and copied back. ``debug.collective_delay_ms`` sleeps before each of those
all-reduces: Paddle's reducer has no comm hook, so on Paddle the delay is in the breakdown steps only.

Sharding (``sharded_phases``): its collectives run inside Paddle's own code, each a call of a public
``paddle.distributed`` function that the code looks up by name when it runs (``paddle.distributed.reduce(...)``,
``dist.broadcast(...)``). For the breakdown steps only, ``timed_calls`` replaces those module attributes
(``reduce``, ``broadcast``, ``all_reduce``) with wrappers that hand each call to ``Collectives.run`` (a
synchronisation, a barrier over the sharding group timed as wait, ``debug.collective_delay_ms``, the call
waited for, timed as communication) and records it as its nccl-tests operation and message size (the tensor's
bytes: the whole buffer for reduce, broadcast and all-reduce); the originals are put back after each phase.
Why there: Paddle offers no hook for these collectives (no comm hook on the sharding optimizer, none
on group_sharded_parallel's backward hooks), so no documented interception point exists; the functions
wrapped are documented public API, the names fleet's code calls them by, where the alternatives are private
(``DygraphShardingOptimizer._sharding_sync_parameters``, the process group's C++ methods) or too coarse
(wrapping ``reduce_gradients`` would time a whole step's reduces as one). Every caller of those names inside
the timed phase is timed, which is what the breakdown wants: any collective of the step. What Paddle 3.3.1
calls per optimizer step:

  stage1  ``HybridParallelOptimizer.step`` -> ``DygraphShardingOptimizer.reduce_gradients``: per trainable
          parameter (fleet's defaults: no ``tensor_fusion``, no ``comm_overlap``, ``split_param`` off so not
          V2), ``paddle.distributed.reduce(grad, dst=owner)`` (AVG where NCCL has it, else the gradient scaled
          by 1/n and summed, as on gloo); then the owner's local optimizer step, then
          ``_sharding_sync_parameters``: per trainable parameter, ``paddle.distributed.broadcast(param,
          src=owner, sync_op=False)``, all waited at the end (here each is waited for in turn). All of it runs
          inside the optimizer step; compute has no collective (``ShardingParallel`` has no reducer).
  stage2  (GPU/XPU) ``GroupShardedStage2``'s backward hooks: ``dist.reduce`` of each full gradient bucket
          (``GradStorage``, per owner rank and dtype) or of a parameter's gradient outside the buckets, to its
          owner, inside backward; the optimizer step then ``dist.broadcast`` of each owner's parameter
          storage. Timed the same way, in compute and optimizer; not run here (Paddle refuses it on a CPU).
  both    with fp16/bf16 (an accelerator), the loss scaler's found-inf flag ``paddle.distributed.all_reduce``
          in the optimizer step: recorded as a 4-byte all-reduce.

nccl-tests' ``reduce`` (busbw = algbw, bus factor 1) prices the reduces: the ``reduce`` micro case
(``training/micro``) measures it.

Not covered, with why (``uncovered``): tensor parallel (fleet's mpu layers all-reduce inside their forward
and backward), pipeline parallel (the schedule's sends and receives), sharding stage3 (its parameter
all-gathers go through the process group's own ``all_gather`` method in group_sharded_stage3's
``_all_gather``, which no ``paddle.distributed`` function sees) and sharding with data parallelism beside it
(its all-reduces span the data-parallel group, the reduces and broadcasts the sharding group: a breakdown
record prices every collective at one group size).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Iterator, Union

import paddle
import paddle.distributed as dist

from training.breakdown import Collectives, Phases
from training.faults import sleep_ms

# The paddle.distributed functions fleet's sharding optimizer (stage1) and group_sharded_parallel (stage2) call
# by name, and the nccl-tests operation each is: the whole buffer is the message size of all three.
SHARDING_CALLS = {"reduce": "reduce", "broadcast": "broadcast", "all_reduce": "allreduce"}


def uncovered(layout, sharding: str) -> str | None:
    """Why a Paddle layout has no measured breakdown, or None; ``sharding``: ``parallel.sharding``."""
    if layout.pp > 1:
        return ("not measured for pipeline parallel on paddle: its sends and receives run inside fleet's "
                "pipeline schedule")
    if layout.tp > 1:
        return ("not measured for tensor parallel on paddle: its all-reduces run inside fleet's mpu layers' "
                "forward and backward, which offer no hook to time them one by one")
    if layout.sharding > 1 and sharding == "stage3":
        return ("not measured for sharding stage3 on paddle: its parameter all-gathers go through the process "
                "group's own all_gather method (group_sharded_stage3's _all_gather), which no paddle.distributed "
                "function sees, so they cannot be timed one by one")
    if layout.sharding > 1 and layout.dp > 1:
        return (f"not measured for sharding with data parallel beside it on paddle (sharding degree "
                f"{layout.sharding}, data-parallel degree {layout.dp}): the all-reduces span the data-parallel "
                "group and the reduces and broadcasts the sharding group, and a breakdown record prices every "
                "collective at one group size")
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


def _waited(work):
    """A collective's result, waited for: an async task (``sync_op=False``) is complete on return."""
    if hasattr(work, "wait"):
        work.wait()
    return work


@contextlib.contextmanager
def timed_calls(inner: Collectives, calls: dict[str, str] = SHARDING_CALLS) -> Iterator[None]:
    """Inside, every call of ``paddle.distributed.<name>`` for ``name`` in ``calls`` runs through
    ``inner.run(op, bytes of its tensor, the call waited for)``; the module's own functions come back on exit.
    A collective called from inside another one (none of these does) is not timed twice."""
    originals = {name: getattr(dist, name) for name in calls}
    busy = []

    def timed(name: str, original):
        @functools.wraps(original)
        def call(*args, **kwargs):
            if busy:
                return original(*args, **kwargs)
            tensor = kwargs["tensor"] if "tensor" in kwargs else args[0]
            busy.append(name)
            try:
                return inner.run(calls[name], int(tensor.size) * tensor.element_size(),
                                 lambda: _waited(original(*args, **kwargs)))
            finally:
                busy.pop()
        return call

    for name, original in originals.items():
        setattr(dist, name, timed(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(dist, name, original)


def sharded_phases(worker) -> Phases:
    """Sharding stage1 (and stage2 on an accelerator) over the whole data group: compute with no gradient
    collective of its own (stage2: its reduces, in backward, timed one by one), no explicit communication phase,
    the optimizer step with each reduce and broadcast timed one by one (see the module docstring)."""
    layout, debug = worker.layout, worker.spec.debug
    group = worker.hcg.get_sharding_parallel_group()
    # a CPU runs each operation before returning (and Paddle refuses to synchronise one)
    inner = Collectives(lambda: None if worker.on_cpu else worker.synchronize(), lambda: dist.barrier(group=group),
                        debug.collective_delay_ms)
    in_backward = worker.spec.parallel.sharding == "stage2"  # group_sharded_parallel's hooks reduce there

    def compute(batches: list) -> None:
        scale = worker.loss_scale(batches)  # the global count's all-reduce: compute, not a sharding collective
        worker.compute_delay()
        with timed_calls(inner) if in_backward else contextlib.nullcontext():
            worker.forward_backward(batches, scale, sync=False)

    def optimize() -> None:
        with timed_calls(inner):
            worker.optimizer_step()

    return Phases(fetch=worker.fetch, compute=compute, communicate=list, optimize=optimize,
                  align=lambda: dist.barrier(group=group), finish=worker.optimizer.clear_grad,
                  group_size=layout.sharding, inner=inner)


def phases(worker) -> Union[Phases, str]:
    """``worker``: a PaddleWorker after its measured steps."""
    layout = worker.layout
    why = uncovered(layout, worker.spec.parallel.sharding) if worker.world > 1 else None
    if why:
        return why
    if worker.world > 1 and layout.sharding > 1:
        return sharded_phases(worker)
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

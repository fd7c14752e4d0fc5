"""Fleet's collectives inside forward, backward and the optimizer step, timed one by one for the time breakdown
(``training/breakdown.py``), at the one place every one of them passes through from Python: the methods of the
process group (``group.process_group``, a ``ProcessGroupGloo`` on a CPU, ``ProcessGroupNCCL`` on a GPU).

Where Paddle 3.3.1 issues them (read in its source; fleet's defaults, dygraph):

  tensor parallel  ``ColumnParallelLinear`` -> ``mp_ops._c_identity`` -> PyLayer ``c_identity_eager``: forward
                   ``_C_ops.c_identity`` (a copy, no communication), backward, in its own Python ``backward``,
                   ``ctx.group.process_group.all_reduce_on_calc_stream(dy)``. ``RowParallelLinear`` and
                   ``VocabParallelEmbedding`` -> ``mp_ops._mp_allreduce`` -> PyLayer ``mp_allreduce_eager``:
                   forward ``group.process_group.all_reduce_on_calc_stream(x)``, backward a copy. The model's
                   LM head calls ``_c_identity`` itself (tied) or is a ``ColumnParallelLinear``. ``TensorParallel``'s
                   forward broadcasts the inputs over the model-parallel group (``broadcast_input_data``:
                   ``paddle.distributed.broadcast`` of each tensor's shape and data; on a CPU cpu_compat's, of each
                   tensor). ``HybridParallelOptimizer.step`` then broadcasts every replicated parameter whose
                   name holds ``embedding``, ``layer_norm`` or ``.b_`` from the group's first rank (``mp_configs``'
                   ``sync_param``, on by default). ``ParallelCrossEntropy`` -> ``_C_ops.c_softmax_with_cross_entropy``:
                   on a GPU a C++ kernel that all-reduces the logits' max, the target logit and the sum of
                   exponentials inside itself (``comm_ctx->AllReduce``), out of Python's reach; on a CPU
                   cpu_compat's Python equivalent, whose three ``paddle.distributed.all_reduce`` calls go through
                   the process group.
  sequence par.    ``sequence_parallel_utils``: ``group.process_group.all_gather(in, out)``,
                   ``paddle.distributed.stream.reduce_scatter`` (-> ``reduce_scatter_tensor``), and the norms'
                   gradient hooks' ``pg.allreduce(grad)``.
  sharding stage1  ``paddle.distributed.reduce`` / ``broadcast`` (-> ``pg.reduce`` / ``pg.broadcast``) over the
                   sharding group (training/paddle/breakdown.py); with data parallelism beside it,
                   ``fused_allreduce_gradients`` -> ``paddle.distributed.all_reduce`` (-> ``pg.all_reduce``) of
                   this rank's own parameters' gradients over the data-parallel group, coalesced in 128 MB buckets.

Every ``paddle.distributed`` function ends in one of those methods, and fleet's PyLayers call them by name on
each use, so ``intercepted`` swaps them on the process group's class (not one instance: pybind objects take no
attributes) for wrappers while a phase runs, and puts the originals back after, also on an error. Each call
goes through ``Collectives.run``: a synchronisation, a barrier over that same process group (timed as wait),
``debug.collective_delay_ms``, the call waited for (timed as communication), recorded as its nccl-tests
operation, message size (all-reduce, broadcast, reduce: the tensor; all-gather: the gathered whole; reduce-
scatter: the scattered whole) and the group's own size (``pg.size()``). The barrier is the collective's own
group's, not the world's: every member of a group issues that group's collectives in the same order (the
collectives themselves need it), so a barrier right before each on the same group can never block where the
collective would not. The world's would: beside sharding, each data-parallel group all-reduces its sharding
rank's own parameters in 128 MB buckets, so two sharding ranks can issue different numbers of them (none at
all for a rank that owns no parameter). A collective called inside a timed one (cpu_compat's
``all_reduce_on_calc_stream`` calls ``all_reduce``) is not timed twice.

Nothing bypasses it silently: while a phase runs, the process group's other collectives (all-to-all, scatter,
gather, send, receive, the partial ones: no nccl-tests size is defined here for them) and every C++ collective
op reachable from Python (``paddle._C_ops`` / ``_legacy_C_ops``: ``c_softmax_with_cross_entropy``,
``c_concat``, ``mp_allreduce_sum``, ``all_reduce_``, ``c_allreduce_sum``, ...; cpu_compat's Python
replacements excepted, whose collectives reach the process group) are tripwires: one call makes the breakdown
say "not measured", naming it, instead of counting its time as compute. What no Python check can see: a
collective that C++ issues without calling Python at all (a C++ reducer, or a C++ op's own backward), and code
that bound an op before the phase (``from paddle._C_ops import all_reduce_``); no such call is on the paths
above.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator, Optional

import paddle

from training.breakdown import Collectives


def _bytes(tensor) -> int:
    return int(tensor.size) * tensor.element_size()


def _total(tensors) -> int:
    return sum(map(_bytes, tensors)) if isinstance(tensors, (list, tuple)) else _bytes(tensors)


def _arg(args: tuple, kwargs: dict, index: int, name: str):
    return args[index] if len(args) > index else kwargs[name]


def _gathered(pg, args: tuple, kwargs: dict) -> int:
    """``all_gather(out, in, sync_op)`` or ``all_gather(in, out)`` (its two pybind overloads): in x group size."""
    source = args[0] if len(args) == 2 and not kwargs else _arg(args, kwargs, 1, "in")
    return _bytes(source) * pg.size()


def _tensor(pg, args: tuple, kwargs: dict) -> int:
    return _bytes(_arg(args, kwargs, 0, "tensor"))


def _input(pg, args: tuple, kwargs: dict) -> int:
    return _total(_arg(args, kwargs, 1, "in"))


# process-group method -> (nccl-tests operation, its message bytes from (pg, args, kwargs))
SIZED = {"all_reduce": ("allreduce", _tensor), "all_reduce_on_calc_stream": ("allreduce", _tensor),
         "allreduce": ("allreduce", _tensor),
         "broadcast": ("broadcast", _tensor), "broadcast_on_calc_stream": ("broadcast", _tensor),
         "reduce": ("reduce", _tensor), "reduce_on_calc_stream": ("reduce", _tensor),
         "all_gather": ("allgather", _gathered),
         "all_gather_on_calc_stream": ("allgather", lambda pg, a, k: _input(pg, a, k) * pg.size()),
         "all_gather_into_tensor": ("allgather", lambda pg, a, k: _input(pg, a, k) * pg.size()),
         "all_gather_into_tensor_on_calc_stream": ("allgather", lambda pg, a, k: _input(pg, a, k) * pg.size()),
         "reduce_scatter": ("reducescatter", _input), "reduce_scatter_on_calc_stream": ("reducescatter", _input),
         "reduce_scatter_tensor": ("reducescatter", _input),
         "reduce_scatter_tensor_on_calc_stream": ("reducescatter", _input)}
# the process group's other collectives (Paddle 3.3.1's ProcessGroup): a call inside a phase is not timed
UNSIZED = ("all_to_all", "all_to_all_on_calc_stream", "all_to_all_single", "all_to_all_single_on_calc_stream",
           "all_to_all_tensor", "all_to_all_tensor_on_calc_stream", "alltoall", "alltoall_single", "gather",
           "scatter", "scatter_on_calc_stream", "scatter_tensor", "scatter_tensor_on_calc_stream", "send",
           "send_on_calc_stream", "recv", "recv_on_calc_stream", "send_partial", "send_partial_on_calc_stream",
           "recv_partial", "recv_partial_on_calc_stream", "all_gather_partial", "all_gather_partial_on_calc_stream")
# C++ ops that communicate inside themselves (paddle._C_ops / _legacy_C_ops), past the process group's methods
CPP_COLLECTIVES = ("all_gather", "all_reduce", "all_reduce_", "all_to_all", "broadcast", "broadcast_",
                   "c_allreduce_sum", "c_allreduce_sum_", "c_concat", "c_scatter", "c_softmax_with_cross_entropy",
                   "c_softmax_with_cross_entropy_", "c_softmax_with_multi_label_cross_entropy",
                   "c_softmax_with_multi_label_cross_entropy_", "dist_concat", "global_gather", "global_scatter",
                   "mp_allreduce_sum", "mp_allreduce_sum_", "p_recv", "p_send", "p_recv_array", "p_send_array",
                   "partial_allgather", "partial_allgather_", "partial_recv", "partial_send", "recv_v2", "send_v2",
                   "reduce", "reduce_", "reduce_scatter")
_MISSING = object()


def barrier(pg, device_id: Optional[int]) -> None:
    """``paddle.distributed.barrier`` over the group whose process group is ``pg`` (``device_id``: None on a
    CPU, else this rank's device)."""
    (pg.barrier() if device_id is None else pg.barrier(device_id)).wait()


def _waited(work):
    """A collective's result, waited for: an async task (``sync_op=False``) is complete on return."""
    if hasattr(work, "wait"):
        work.wait()
    return work


def _swap(owner, name: str, replacement, saved: list) -> None:
    saved.append((owner, name, vars(owner).get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name)))
    setattr(owner, name, replacement)


def _restore(saved: list) -> None:
    for owner, name, original in reversed(saved):
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


@contextlib.contextmanager
def intercepted(inner: Collectives, classes: set, device_id: Optional[int] = None) -> Iterator[None]:
    """Inside, every sized collective method of a process group of ``classes`` runs through ``inner.run`` (its
    operation, bytes and group size, a barrier over its own group first), and a collective that cannot be timed
    (``UNSIZED``, ``CPP_COLLECTIVES``) sets ``inner.unmeasured``; everything is put back on exit."""
    busy: list = []

    def timed(name: str, original) -> Callable:
        op, size = SIZED[name]

        def call(pg, *args, **kwargs):
            if busy:  # inside a timed collective: part of it
                return original(pg, *args, **kwargs)
            busy.append(name)
            try:
                return inner.run(op, size(pg, args, kwargs), lambda: _waited(original(pg, *args, **kwargs)),
                                 ranks=pg.size(), barrier=lambda: barrier(pg, device_id))
            finally:
                busy.pop()
        return call

    def tripwire(where: str, name: str, original) -> Callable:
        def call(*args, **kwargs):
            if not busy and not inner.unmeasured:
                inner.unmeasured = (f"not measured: {where}.{name} ran a collective inside a timed phase that the "
                                    "breakdown cannot time one by one (training/paddle/breakdown_collectives.py)")
            return original(*args, **kwargs)
        return call

    saved: list = []
    try:
        for cls in classes:
            for name in SIZED:
                if hasattr(cls, name):
                    _swap(cls, name, timed(name, getattr(cls, name)), saved)
            for name in UNSIZED:
                if hasattr(cls, name):
                    _swap(cls, name, tripwire(cls.__name__, name, getattr(cls, name)), saved)
        for ops, where in ((paddle._C_ops, "paddle._C_ops"), (paddle._legacy_C_ops, "paddle._legacy_C_ops")):
            for name in CPP_COLLECTIVES:
                original = getattr(ops, name, None)
                if isinstance(original, types.BuiltinFunctionType):  # C++; cpu_compat's Python ones stay
                    _swap(ops, name, tripwire(where, name, original), saved)
        yield
    finally:
        _restore(saved)


def process_group_classes(hcg) -> set:
    """The classes of the process groups of this layout (the world's and each hybrid group's)."""
    from paddle.distributed import collective

    groups = [collective._get_global_group()]
    if hcg is not None:
        groups += [hcg.get_model_parallel_group(), hcg.get_data_parallel_group(),
                   hcg.get_sharding_parallel_group(), hcg.get_pipe_parallel_group()]
    return {type(g.process_group) for g in groups if getattr(g, "process_group", None) is not None}


def timed(inner: Collectives, classes: set, device_id: Optional[int]) -> Callable[[Callable], Callable]:
    """Wraps a phase so that its collectives run one by one through ``inner`` (see ``intercepted``)."""
    def wrap(phase: Callable) -> Callable:
        def run(*args, **kwargs) -> Any:
            with intercepted(inner, classes, device_id):
                return phase(*args, **kwargs)
        return run
    return wrap

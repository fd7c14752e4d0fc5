"""Tensor parallel's collectives in the time breakdown (``training/breakdown.py``), and
``debug.collective_delay_ms`` before each of them in the measured steps.

DTensor (``parallelize_module``, training/torch/parallel.py) runs tensor parallel's collectives inside
forward and backward, and with sequence parallelism also inside the optimizer step. None of them has a
per-collective hook, but all of them are functional collectives: an op of ``torch.ops._c10d_functional``
that issues the collective, then ``wait_tensor``. Eager DTensor calls them through that namespace on each
use (``torch.distributed._functional_collectives``; ``torch.ops._dtensor.shard_dim_alltoall`` for
all-to-all), in backward too. So do the blocks that ``torch.compile`` built: inductor's wrapper code calls
``torch.ops._c10d_functional.all_reduce_.default`` (tests/test_breakdown_tp.py sees it do so on a CPU).
``intercepted`` swaps those namespace entries for wrappers while a phase runs, so each collective goes
through ``around(op, bytes, ranks, issue)``. Other ops pay nothing.

A ``TorchDispatchMode`` would see every op instead, the way torch's own ``CommDebugMode`` does, but it puts
Python into every op's dispatch. On an H200 (torch 2.11), one eager step of a 12-block d_model 1024
transformer went from 33.6 to 63 ms of host-bound time under a pass-through mode (compiled: 25.3 to 25.9
ms). That would have counted as compute.

Nothing is missed silently. After each intercepted phase the tensor-parallel group's collective sequence
number (``ProcessGroup._get_sequence_number_for_group``) must have moved by exactly the collectives
intercepted on that group, plus the breakdown's own barriers where the group is the default one. A test
checks this on gloo; NCCL keeps the same counter, but that has not been run on GPUs here. If the number
moved by more, something issued a collective past the wrappers (C++ code calling the ops directly), and
the breakdown says "not measured". Where a backend keeps no counter, the check is skipped.

CUDA graphs (``train.compile`` reduce-overhead or max-autotune on a device) replay their collectives
without calling their ops. On an H200 a dispatch mode saw 0 of 3 replayed all-reduces, against 3 of 3
under mode default. That combination says "not measured" (``uncovered``).

In the breakdown steps each collective goes through ``Collectives.run``: device synchronisation, a barrier
on the default group (timed as wait), the collective issued and waited for (``wait_tensor``, timed as
communication). It is recorded with its nccl-tests op name, its message size (all-reduce: the buffer;
all-gather: the gathered whole; reduce-scatter: the scattered whole; the FSDP hooks' convention in
training/torch/breakdown.py) and its own group's size. The barrier is on the default group because every
rank issues the same collectives in the same order. With tensor parallelism only, all ranks are one group.
With FSDP2 on the data-parallel mesh dimension beside it, every tensor-parallel group runs the same blocks,
and FSDP2's own all-gathers and reduce-scatters come at the same points on every rank (timed through its
hooks with the same barrier).

What DTensor issues per block and micro-batch for this model (tests/test_breakdown_tp.py):

* Eager or compiled, without sequence parallelism: 2 all-reduces in forward (the row-parallel outputs). In
  backward, one all-reduce of the input gradient per column-parallel projection (q, k, v, fc, and gate
  with swiglu), since each ``ColwiseParallel`` turns its input into a DTensor of its own. That makes 6 per
  block (7 with swiglu), not Megatron-LM's 4 with fused QKV; run_benchmarks/results/breakdown/layouts.py
  counts the same way.
* With sequence parallelism: an all-gather and a reduce-scatter each, both ways, 8 per block. The sequence
  slices add 2 all-gathers per micro-batch: the last block's output gathered for the final norm, and the
  first block's input gradient in backward. The optimizer step all-reduces the norms' Partial gradients,
  once for each time AdamW reads one.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional

import torch
import torch.distributed as dist

from training.faults import sleep_ms

# namespace -> its collectives (the functional API's, and DTensor's own all-to-all)
COLLECTIVES = {
    "_c10d_functional": ("all_reduce", "all_reduce_", "all_reduce_coalesced", "all_reduce_coalesced_",
                         "all_gather_into_tensor", "all_gather_into_tensor_out", "all_gather_into_tensor_coalesced",
                         "reduce_scatter_tensor", "reduce_scatter_tensor_out", "reduce_scatter_tensor_coalesced",
                         "all_to_all_single", "broadcast", "broadcast_"),
    "_c10d_functional_autograd": ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"),
    "_dtensor": ("shard_dim_alltoall",),
}
OPERATIONS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
              "all_to_all": "alltoall", "shard_dim_alltoall": "alltoall", "broadcast": "broadcast"}
# CUDA graphs replay compiled blocks without calling their ops (torch.compile's modes that use them)
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")

Around = Callable[[str, int, int, str, Callable[[], Any]], Any]  # (op, bytes, ranks, group, issue) -> issue()


def uncovered(spec, on_cpu: bool) -> Optional[str]:
    """Why this tensor-parallel layout has no breakdown, or None."""
    mode = spec.train.compile
    if mode in CUDA_GRAPH_MODES and not on_cpu:
        return (f"not measured for tensor parallel with train.compile={mode}: its CUDA graphs replay the "
                "compiled blocks' collectives without calling them, so nothing can time them one by one")
    return None


def operation(name: str) -> str:
    """The nccl-tests operation of collective ``name`` (an op's name in ``COLLECTIVES``)."""
    return next(op for prefix, op in OPERATIONS.items() if name.startswith(prefix))


def _group_name(group) -> str:
    return group.group_name if isinstance(group, dist.ProcessGroup) else str(group)


def message(op: str, overload, args: tuple, kwargs: dict) -> tuple[int, int, str]:
    """(nccl-tests' message bytes, group size, group name) of collective ``overload`` called with these."""
    named = dict(zip((a.name for a in overload._schema.arguments), args), **kwargs)
    group = named["group_name"]
    if "group_size" in named:
        ranks = named["group_size"]
    else:
        from torch.distributed.distributed_c10d import _resolve_process_group

        ranks = (group if isinstance(group, dist.ProcessGroup) else _resolve_process_group(group)).size()
    tensors = named["input"] if "input" in named else named["inputs"]
    nbytes = sum(t.numel() * t.element_size() for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors]))
    return (nbytes * ranks if op == "allgather" else nbytes), int(ranks), _group_name(group)


def wait(out):
    """``out`` once its collective has completed (every tensor of a coalesced one; a no-op for a tensor whose
    collective was already waited for or ran synchronously)."""
    for tensor in out if isinstance(out, (list, tuple)) else [out]:
        torch.ops._c10d_functional.wait_tensor(tensor)
    return out


class _Overload:
    """An op overload whose calls go through ``around``; anything else is the overload's."""

    def __init__(self, overload, op: str, around: Around):
        self._overload, self._op, self._around = overload, op, around

    def __call__(self, *args, **kwargs):
        nbytes, ranks, group = message(self._op, self._overload, args, kwargs)
        return self._around(self._op, nbytes, ranks, group, lambda: self._overload(*args, **kwargs))

    def __getattr__(self, name: str):
        return getattr(self._overload, name)


class _Packet:
    """An op packet (every collective here has the one overload ``default``) whose calls go through
    ``around``."""

    def __init__(self, packet, op: str, around: Around):
        self._packet = packet
        self.default = _Overload(packet.default, op, around)

    def __call__(self, *args, **kwargs):
        return self.default(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._packet, name)


@contextlib.contextmanager
def intercepted(around: Around) -> Iterator[None]:
    """Every tensor-parallel collective called while inside goes through ``around``, on any thread (autograd's
    backward threads included)."""
    import torch.distributed.tensor  # noqa: F401 - registers _dtensor's ops

    spaces = [(getattr(torch.ops, ns), name) for ns, names in COLLECTIVES.items() for name in names]
    saved = [(space, name, getattr(space, name)) for space, name in spaces if hasattr(space, name)]
    for space, name, packet in saved:
        setattr(space, name, _Packet(packet, operation(name), around))
    try:
        yield
    finally:
        for space, name, packet in saved:
            setattr(space, name, packet)


def tensor_parallel_group(model) -> Optional[dist.ProcessGroup]:
    """The process group of the model's tensor-parallel mesh dimension (DTensor parameters' mesh)."""
    from torch.distributed.tensor import DTensor

    for p in model.parameters():
        if isinstance(p, DTensor) and "tp" in (p.device_mesh.mesh_dim_names or ()):
            return p.device_mesh.get_group("tp")
    return None


def _sequence(group: Optional[dist.ProcessGroup]) -> Optional[int]:
    try:
        return int(group._get_sequence_number_for_group())
    except (AttributeError, RuntimeError, TypeError):  # no group, or a backend that does not count
        return None


def timed(inner, group: Optional[dist.ProcessGroup]) -> Callable[[Callable], Callable]:
    """Wraps a phase so that its tensor-parallel collectives run one by one through ``inner``
    (``Collectives``); ``group``: the tensor-parallel group, whose sequence number checks that none was
    missed (the breakdown then says "not measured" instead of counting its time as compute)."""
    default = _group_name(dist.group.WORLD)
    counted = [0]

    def around(op: str, nbytes: int, ranks: int, name: str, issue: Callable[[], Any]) -> Any:
        counted[0] += group is not None and name == group.group_name
        return inner.run(op, nbytes, lambda: wait(issue()), ranks=ranks)

    def wrap(phase: Callable) -> Callable:
        def run(*args, **kwargs):
            before, runs = _sequence(group), len(inner.ops)
            counted[0] = 0
            with intercepted(around):
                out = phase(*args, **kwargs)
            after = _sequence(group)
            if before is not None and after is not None and not inner.unmeasured:
                barriers = len(inner.ops) - runs if group.group_name == default else 0
                missed = after - before - counted[0] - barriers
                if missed:
                    inner.unmeasured = (f"not measured for tensor parallel: {missed} collective(s) ran on the "
                                        "tensor-parallel group past the functional collectives the breakdown "
                                        "times (training/torch/breakdown_tp.py)")
            return out

        return run

    return wrap


def delayed(delay_ms: Optional[float]) -> Callable[[], contextlib.AbstractContextManager]:
    """``debug.collective_delay_ms`` before each tensor-parallel collective of a measured step (issued as
    DTensor issues it, not waited for); a context of nothing without a delay."""
    if not delay_ms:
        return contextlib.nullcontext

    def around(op: str, nbytes: int, ranks: int, group: str, issue: Callable[[], Any]) -> Any:
        sleep_ms(delay_ms)
        return issue()

    return lambda: intercepted(around)

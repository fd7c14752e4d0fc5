"""Let fleet's tensor, sequence and pipeline parallel layers run on a CPU (gloo), so CI can test them.

Why this exists: fleet's model-parallel layers and pipeline scheduler call the
process group's ``*_on_calc_stream`` collectives, which only the accelerator
backends (NCCL, XCCL, custom devices) implement; gloo raises
``NotImplementedError``. A CPU has no separate communication stream, so the
ordinary synchronous collective is the same operation. Fleet's sequence-parallel
ops (``sequence_parallel_utils.ReduceScatterOp``) call the process group's
``reduce_scatter_tensor``, which gloo does not implement either ("ProcessGroupGLOO
does not support reduce_scatter with sync_op flag"): on a CPU it is an all-reduce
that keeps this rank's slice of the first axis. The ``c_*`` model-parallel
ops (identity, split, concat, vocabulary-parallel softmax cross entropy) have
no CPU kernels, so they get small Python equivalents with their gradients.
Fleet's tensor-parallel wrapper asserts an accelerator place before
broadcasting its inputs, and ``PipelineLayer`` reads a device id that
``ParallelEnv`` only sets for accelerators. Its recompute (``recompute_hybrid``)
asserts an accelerator place ("Recompute with RNG is not support current device:
cpu"); with activations neither partitioned nor offloaded it is fleet's plain
``recompute``, which a CPU supports.

Gloo's groups of more than 2 ranks (``install_group_stores``, before ``fleet.init``): Paddle 3.3.1's
``ProcessGroupGloo`` runs gloo's rendezvous (``connectFullMesh``) on the job's one TCP store with no per-group
prefix, so two groups of the same size that fleet creates side by side (sharding 2 x data parallel 2: the
data-parallel groups [0, 2] and [1, 3]) write and read the same keys ("0", "1"): a rank connects to the other
group's peer, and ``fleet.init`` fails ("connect [127.0.0.1]:N: Connection refused") or hangs. Each gloo group
gets a TCP store of its own instead, served by the group's first rank, its address handed over through the
job's store under a key holding the group's id. With 2 ranks every group is the whole world, created one
after another by both ranks in the same order, and the worker leaves group creation alone.

``install()`` and ``install_group_stores()`` are called by the Paddle worker only when it trains on a CPU place;
they touch nothing on a GPU, so the measured path there is fleet's own.
"""
from __future__ import annotations

import os
import socket

import paddle
import paddle.distributed as dist
from paddle.autograd import PyLayer

_installed = False
STORE_TIMEOUT_S = 900  # Paddle's own default for its job store


def _sync(task):
    task.wait()
    return task


def _calc_stream_replacements() -> dict:
    """Each ``X_on_calc_stream`` as the synchronous ``X`` that gloo has."""
    return {
        "all_reduce_on_calc_stream":
            lambda self, tensor, op=dist.ReduceOp.SUM: _sync(self.all_reduce(tensor, op, True)),
        "all_gather_into_tensor_on_calc_stream":
            lambda self, out, tensor: _sync(self.all_gather_into_tensor(out, tensor, True)),
        "broadcast_on_calc_stream": lambda self, tensor, src: _sync(self.broadcast(tensor, src, True)),
        "send_on_calc_stream": lambda self, tensor, dst: _sync(self.send(tensor, dst, True)),
        "recv_on_calc_stream": lambda self, tensor, src: _sync(self.recv(tensor, src, True)),
        "send_partial_on_calc_stream":
            lambda self, tensor, dst, num, index: _sync(self.send_partial(tensor, dst, num, index, True)),
        "recv_partial_on_calc_stream":
            lambda self, tensor, src, num, index: _sync(self.recv_partial(tensor, src, num, index, True)),
        "all_gather_partial_on_calc_stream":
            lambda self, out, tensor, num, index: _sync(self.all_gather_partial(out, tensor, num, index)),
    }


def _reduce_scatter_tensor(self, out, tensor, op=dist.ReduceOp.SUM, sync_op=True):
    """Reduce across the group, keep this rank's block of the first axis (``out`` is written in place)."""
    total = tensor.clone()
    task = _sync(self.all_reduce(total, op, True))
    paddle.assign(paddle.split(total, self.size(), axis=0)[self.rank()], output=out)
    return task


def _group(ring_id: int):
    return paddle.distributed.collective._get_group_map()[ring_id]


def _gather_last_axis(tensor, group):
    parts: list = []
    dist.all_gather(parts, tensor, group=group)
    return paddle.concat(parts, axis=-1)


class _Concat(PyLayer):
    """c_concat: all-gather along the last axis; the gradient is this rank's slice."""

    @staticmethod
    def forward(ctx, tensor, rank, nranks, ring_id):
        ctx.rank, ctx.nranks = rank, nranks
        return _gather_last_axis(tensor, _group(ring_id))

    @staticmethod
    def backward(ctx, grad):
        return paddle.split(grad, ctx.nranks, axis=-1)[ctx.rank].clone()


class _Split(PyLayer):
    """c_split: this rank's slice of the last axis; the gradient is gathered back."""

    @staticmethod
    def forward(ctx, tensor, rank, nranks, ring_id):
        ctx.ring_id = ring_id
        return paddle.split(tensor, nranks, axis=-1)[rank].clone()

    @staticmethod
    def backward(ctx, grad):
        return _gather_last_axis(grad, _group(ctx.ring_id))


class _VocabParallelCrossEntropy(PyLayer):
    """c_softmax_with_cross_entropy: softmax cross entropy over logits split by vocabulary.

    Max and sum of exponentials are all-reduced across the group, the target logit
    comes from the rank that holds it; the gradient is softmax - one-hot, locally.
    """

    @staticmethod
    def forward(ctx, logits, label, ignore_index, ring_id, rank, nranks):
        group = _group(ring_id)
        logits = logits.astype("float32")
        local_vocab = logits.shape[-1]
        start = rank * local_vocab
        peak = logits.max(axis=-1, keepdim=True)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - peak
        exp = paddle.exp(shifted)
        total = exp.sum(axis=-1, keepdim=True)
        dist.all_reduce(total, group=group)
        local = label - start
        mine = (local >= 0) & (local < local_vocab)
        index = paddle.where(mine, local, paddle.zeros_like(local))
        target = paddle.take_along_axis(shifted, index, axis=-1) * mine.astype("float32")
        dist.all_reduce(target, group=group)
        ignored = label == ignore_index
        loss = paddle.where(ignored, paddle.zeros_like(target), paddle.log(total) - target)
        softmax = exp / total
        ctx.save_for_backward(softmax, index, mine, ignored)
        return softmax, loss

    @staticmethod
    def backward(ctx, grad_softmax, grad_loss):
        softmax, index, mine, ignored = ctx.saved_tensor()
        one_hot = paddle.nn.functional.one_hot(index.squeeze(-1), softmax.shape[-1]) * mine.astype("float32")
        keep = (~ignored).astype("float32")
        return (softmax - one_hot) * grad_loss * keep, None


def _identity(tensor, ring_id, use_calc_stream, use_model_parallel):
    return tensor.clone()


def _concat(tensor, rank, nranks, ring_id, use_calc_stream, use_model_parallel):
    return _Concat.apply(tensor, rank, nranks, ring_id)


def _split(tensor, rank, nranks, ring_id, use_model_parallel):
    return _Split.apply(tensor, rank, nranks, ring_id)


def _softmax_with_cross_entropy(logits, label, ignore_index, ring_id, rank, nranks):
    return _VocabParallelCrossEntropy.apply(logits, label, ignore_index, ring_id, rank, nranks)


def _broadcast_input_data(hcg, *inputs, **kwargs):
    """Fleet's version asserts an accelerator place; on CPU, the same broadcast with gloo."""
    group, src = hcg.get_model_parallel_group(), hcg.get_model_parallel_group_src_rank()
    for tensor in (*inputs, *kwargs.values()):
        if isinstance(tensor, paddle.Tensor):
            dist.broadcast(tensor, src=src, group=group)
    return inputs, kwargs


def _recompute_hybrid(ctx, function, *args, **kwargs):
    """Fleet's hybrid recompute on a CPU: the plain ``recompute`` (nothing to partition or offload)."""
    from paddle.distributed.fleet.utils import recompute

    if ctx.get("partition") or ctx.get("offload"):
        raise NotImplementedError("recompute with partitioned or offloaded activations needs an accelerator")
    return recompute(function, *args, **kwargs)


def install() -> None:
    """Patch gloo and fleet for CPU training. Call only on a CPU place, after ``fleet.init``."""
    global _installed
    if _installed:
        return
    if not paddle.get_device().startswith("cpu"):
        raise RuntimeError("cpu_compat.install() is for CPU places only; the accelerator path is fleet's own")
    from paddle.base.libpaddle import ProcessGroupGloo
    from paddle.distributed.fleet.meta_parallel import tensor_parallel
    from paddle.distributed.fleet.meta_parallel.parallel_layers import pp_layers

    for name, replacement in _calc_stream_replacements().items():
        setattr(ProcessGroupGloo, name, replacement)
    ProcessGroupGloo.reduce_scatter_tensor = _reduce_scatter_tensor
    tensor_parallel.broadcast_input_data = _broadcast_input_data
    pp_layers.recompute_hybrid = _recompute_hybrid
    # ParallelEnv sets _device_id only for accelerator places; PipelineLayer reads it (a CPU is device 0).
    if not hasattr(dist.ParallelEnv(), "_device_id"):
        dist.ParallelEnv._device_id = 0
    # The c_* model-parallel ops have no CPU kernels ("Do not support c_identity for cpu kernel now").
    for ops in (paddle._C_ops, paddle._legacy_C_ops):
        ops.c_identity, ops.c_concat, ops.c_split = _identity, _concat, _split
    paddle._C_ops.c_softmax_with_cross_entropy = _softmax_with_cross_entropy
    _installed = True


def _own_store(job_store, rank: int, world_size: int, group_id: int):
    """A TCP store for gloo group ``group_id`` alone: its first rank serves it on a free port of this host, the
    others connect to the address it leaves in the job's store."""
    from paddle.base import core

    key = f"accelbench/gloo_group_store/{group_id}"
    if rank == 0:
        host = os.environ.get("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:0").rsplit(":", 1)[0]
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        job_store.set(key, f"{host}:{port}")  # first: the server waits for every member in its constructor
        return core.TCPStore(host, port, True, world_size, STORE_TIMEOUT_S)
    job_store.wait(key)
    address = job_store.get(key)
    host, port = (address.decode() if isinstance(address, bytes) else bytes(address).decode()).rsplit(":", 1)
    return core.TCPStore(host, int(port), False, world_size, STORE_TIMEOUT_S)


def install_group_stores() -> None:
    """Give each gloo group a TCP store of its own (see the module docstring). Call on a CPU place, before
    ``fleet.init``."""
    from paddle.distributed import collective

    if not paddle.get_device().startswith("cpu"):
        raise RuntimeError("cpu_compat.install_group_stores() is for CPU places only (gloo)")
    create = collective._new_process_group_impl
    if getattr(create, "_own_stores", False):
        return

    def new_process_group(backend, store, rank, world_size, group_name, pg_options, group_id=0, **kwargs):
        if backend == "gloo":
            store = _own_store(store, rank, world_size, group_id)
        return create(backend, store, rank, world_size, group_name, pg_options, group_id=group_id, **kwargs)

    new_process_group._own_stores = True
    collective._new_process_group_impl = new_process_group

"""Fleet's collectives timed at the process group (training/paddle/breakdown_collectives.py), in one process with
a stand-in process-group class: each sized method timed by ``Collectives.run`` as its nccl-tests op, message
size and group size after a barrier over its own group, waited for, never twice when nested, the class put back
after (also on an error); fleet's real mpu PyLayers (``_mp_allreduce`` forward, ``_c_identity`` backward) reach
the wrappers; a collective the wrappers cannot time (another process-group method, a C++ collective op) makes
the phase "not measured"; cpu_compat's per-group stores for gloo. The real ranks are
tests/test_paddle_breakdown_fleet_launch.py."""
from __future__ import annotations

import types
from types import SimpleNamespace

import paddle
import pytest

from training.breakdown import Collectives
from training.paddle import breakdown_collectives as collectives


class _Task:
    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def wait(self):
        self.log.append(f"wait {self.name}")


class _Base:
    """Where Paddle's ProcessGroup defines its methods (pybind: on the base class)."""

    def all_reduce(self, tensor, op, sync_op):
        self.log.append(f"all_reduce {int(tensor.size)}")
        return _Task(self.log, "all_reduce")

    def broadcast(self, tensor, src, sync_op):
        self.log.append(f"broadcast {int(tensor.size)}")
        return _Task(self.log, "broadcast")

    def all_gather(self, *args):
        self.log.append(f"all_gather {len(args)}")
        return _Task(self.log, "all_gather")

    def reduce_scatter_tensor(self, out, tensor, op, sync_op):
        self.log.append(f"reduce_scatter {int(tensor.size)}")
        return _Task(self.log, "reduce_scatter")

    def reduce(self, tensor, dst, op, sync_op):
        self.log.append(f"reduce {int(tensor.size)}")
        return _Task(self.log, "reduce")

    def send(self, tensor, dst, sync_op):
        self.log.append("send")
        return _Task(self.log, "send")

    def barrier(self, device_id=-1):
        self.log.append(f"barrier {self.ranks}")
        return _Task(self.log, "barrier")

    def size(self):
        return self.ranks


class _Gloo(_Base):
    """The gloo class, with cpu_compat's own on_calc_stream method set on it: it calls ``all_reduce``."""

    def __init__(self, log: list, ranks: int):
        self.log, self.ranks = log, ranks

    def all_reduce_on_calc_stream(self, tensor, op=None):
        task = self.all_reduce(tensor, op, True)
        task.wait()
        return task


def _inner(log: list) -> Collectives:
    return Collectives(lambda: log.append("sync"), lambda: log.append("world barrier"))


def test_each_collective_is_timed_with_its_size_and_group_after_its_own_groups_barrier_then_put_back():
    log: list = []
    tp, dp = _Gloo(log, 2), _Gloo(log, 4)
    inner, before = _inner(log), dict(vars(_Gloo))
    grad, shard = paddle.ones([3, 4]), paddle.ones([5], dtype="float64")
    with collectives.intercepted(inner, {_Gloo}):
        tp.all_reduce_on_calc_stream(grad)  # fleet's PyLayers; it calls all_reduce inside: timed once
        dp.broadcast(shard, 0, False)  # an async task: waited for inside its timing
        tp.all_gather(grad, paddle.zeros([6, 4]))  # sequence parallel's (in, out)
        tp.all_gather([], grad, True)  # paddle.distributed.all_gather's (out list, in, sync_op)
        tp.reduce_scatter_tensor(paddle.zeros([3, 4]), paddle.ones([6, 4]), None, True)
        dp.reduce(grad, 1, None, True)
    assert inner.ops == [("allreduce", 48), ("broadcast", 40), ("allgather", 96), ("allgather", 96),
                         ("reducescatter", 96), ("reduce", 48)]
    assert inner.ranks == [2, 4, 2, 2, 2, 4] and inner.unmeasured is None
    assert log[:11] == ["sync", "barrier 2", "wait barrier", "all_reduce 12", "wait all_reduce", "wait all_reduce",
                        "sync", "sync", "barrier 4", "wait barrier", "broadcast 5"]
    assert "world barrier" not in log  # each over its own group
    assert dict(vars(_Gloo)) == before and "all_reduce" not in vars(_Gloo)  # the base's method shows again
    log.clear()
    tp.all_reduce(grad, None, True)
    assert log == ["all_reduce 12"] and len(inner.ops) == 6  # after the phase: untouched


def test_a_failure_inside_puts_every_method_back():
    log: list = []
    before, ops = dict(vars(_Gloo)), {name: getattr(paddle._C_ops, name, None)
                                      for name in collectives.CPP_COLLECTIVES}
    with pytest.raises(RuntimeError, match="boom"), collectives.intercepted(_inner(log), {_Gloo}):
        raise RuntimeError("boom")
    assert dict(vars(_Gloo)) == before
    assert {name: getattr(paddle._C_ops, name, None) for name in collectives.CPP_COLLECTIVES} == ops


def test_fleets_mpu_pylayers_reach_the_wrappers_in_forward_and_backward(monkeypatch):
    """``_mp_allreduce`` (RowParallelLinear, VocabParallelEmbedding) all-reduces in its forward,
    ``_c_identity`` (ColumnParallelLinear, the tied head) in its PyLayer's backward: both through
    ``group.process_group.all_reduce_on_calc_stream``, looked up on the class at each call."""
    from paddle.distributed.fleet.layers.mpu import mp_ops

    from training.paddle import cpu_compat

    monkeypatch.setattr(paddle._C_ops, "c_identity", cpu_compat._identity)  # no CPU kernel: cpu_compat's copy
    log: list = []
    group = SimpleNamespace(process_group=_Gloo(log, 2), id=0, nranks=2, is_member=lambda: True)
    inner = _inner(log)
    x = paddle.ones([2, 3])
    x.stop_gradient = False
    with collectives.intercepted(inner, {_Gloo}):
        y = mp_ops._mp_allreduce(mp_ops._c_identity(x, group=group) * 2, group=group)
        assert inner.ops == [("allreduce", 24)]  # forward: the row-parallel output
        y.sum().backward()
    assert inner.ops == [("allreduce", 24), ("allreduce", 24)]  # backward: the column-parallel input's gradient
    assert inner.ranks == [2, 2] and inner.unmeasured is None


def test_a_collective_the_wrappers_cannot_time_makes_the_phase_not_measured(monkeypatch):
    log: list = []
    inner = _inner(log)
    with collectives.intercepted(inner, {_Gloo}):
        _Gloo(log, 2).send(paddle.ones([2]), 1, True)
    assert inner.ops == [] and log == ["send"]  # still sent
    assert inner.unmeasured.startswith("not measured: _Gloo.send ran a collective inside a timed phase")
    builtin = types.BuiltinFunctionType
    assert isinstance(len, builtin)
    monkeypatch.setattr(paddle._C_ops, "mp_allreduce_sum", len)  # a C++ op that all-reduces inside itself
    python = []
    monkeypatch.setattr(paddle._C_ops, "c_concat", lambda *a: python.append(a))  # cpu_compat's kind: Python
    inner = _inner(log)
    with collectives.intercepted(inner, {_Gloo}):
        paddle._C_ops.c_concat(1)
        assert inner.unmeasured is None  # its own collectives reach the process group
        assert paddle._C_ops.mp_allreduce_sum([1, 2]) == 2
    assert inner.unmeasured.startswith("not measured: paddle._C_ops.mp_allreduce_sum ran a collective")
    assert paddle._C_ops.mp_allreduce_sum is len and python == [(1,)]


def test_gloo_groups_get_their_own_store_and_other_backends_keep_the_jobs(monkeypatch):
    """cpu_compat.install_group_stores: Paddle's ProcessGroupGloo would run gloo's rendezvous on the job's store
    with no per-group prefix (two groups of one size side by side read each other's keys); each gloo group gets
    a TCP store of its own, its address left in the job's store under the group's id."""
    import socket

    from paddle.base import core
    from paddle.distributed import collective

    from training.paddle import cpu_compat

    created = []
    monkeypatch.setattr(collective, "_new_process_group_impl",
                        lambda backend, store, rank, size, name, options, group_id=0, **kw:
                        created.append((backend, store, group_id)))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = core.TCPStore("127.0.0.1", port, True, 1, 30)
    cpu_compat.install_group_stores()
    cpu_compat.install_group_stores()  # once only
    collective._new_process_group_impl("gloo", job, 0, 1, "g", None, group_id=7)
    collective._new_process_group_impl("nccl", job, 0, 1, "n", None, group_id=8)
    (_, own, gid), (_, kept, _) = created
    assert gid == 7 and isinstance(own, core.TCPStore) and own is not job and kept is job
    host, served = job.get("accelbench/gloo_group_store/7").decode().rsplit(":", 1)
    own.set("k", "v")
    assert core.TCPStore(host, int(served), False, 1, 30).get("k") == b"v"

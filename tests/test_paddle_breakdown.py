"""Paddle's explicit collective paths for the time breakdown (training/paddle/breakdown.py), in one process: data
parallel's reducer parameter list, its buckets all-reduced in the reducer's order and averaged back into the
gradients; sharding's interception of the paddle.distributed functions its optimizer calls, each call timed by
``Collectives.run`` as its nccl-tests operation and bytes, the module's own functions back afterwards; the
expected time of sharding's reduces and broadcasts (bytes x 1 / the stored busbw of each, exactly); what stays
uncovered and why. The two-rank proofs (a collective delay grows communication by C x D) are
tests/test_paddle_breakdown_launch.py."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from training.paddle import breakdown


def _net():
    paddle.seed(0)
    net = paddle.nn.Sequential(paddle.nn.Linear(3, 4), paddle.nn.Linear(4, 2))
    net(paddle.ones([2, 3])).sum().backward()
    return net


def test_the_reducers_parameter_list_each_trainable_parameter_once_in_sublayer_order():
    net = _net()
    frozen, local = net[0].bias, net[1].bias
    frozen.trainable = False
    local.no_sync = True  # DataParallel leaves these out of its reducer
    params = breakdown.reducer_parameters(net)
    assert [id(p) for p in params] == [id(net[0].weight), id(net[1].weight)]


def test_buckets_all_reduced_in_the_reducers_order_and_averaged_back(monkeypatch):
    """A stand-in all-reduce adds another rank's gradient (all ones): each gradient becomes (own + 1) / 2."""
    net = _net()
    params = breakdown.reducer_parameters(net)
    before = [p.grad.numpy().copy() for p in params]
    seen = []

    def all_reduce(tensor, group=None):
        seen.append(int(tensor.size))
        paddle.assign(tensor + 1, output=tensor)

    monkeypatch.setattr(breakdown.dist, "all_reduce", all_reduce)
    sizes = breakdown.all_reduce_buckets(params, [[0, 1], [2, 3]], None, 2)
    assert seen == [4 * 2 + 2, 3 * 4 + 4]  # the reducer issues group_indices reversed
    assert sizes == [n * 4 for n in seen]  # fp32 bytes of each bucket
    for param, grad in zip(params, before):
        np.testing.assert_allclose(param.grad.numpy(), (grad + 1) / 2, rtol=1e-6)


@pytest.mark.parametrize("world, expected", [(1, None), (2, "not measured for data parallel on paddle: the model "
                                                                "is a Sequential, not DataParallel")])
def test_phases_of_one_process_and_a_model_that_is_not_data_parallel(world, expected):
    from types import SimpleNamespace

    from training.contract.spec import DebugSpec

    worker = SimpleNamespace(layout=SimpleNamespace(pp=1, tp=1, sharding=1, data=world), world=world,
                             model=_net(), spec=SimpleNamespace(debug=DebugSpec(),
                                                                parallel=SimpleNamespace(sharding="none")), fetch=list,
                             optimizer_step=lambda: None, optimizer=SimpleNamespace(clear_grad=lambda: None))
    got = breakdown.phases(worker)
    if expected:
        assert got == expected
    else:
        assert got.group_size == 1 and got.communicate() == [] and got.align() is None


class _Task:
    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def wait(self):
        self.log.append(f"wait {self.name}")


def _stand_ins(monkeypatch, log: list) -> None:
    """paddle.distributed's reduce, broadcast and all_reduce as loggers returning async tasks."""
    for name in breakdown.SHARDING_CALLS:
        def call(tensor=None, *args, _name=name, **kwargs):
            log.append(f"{_name} {int(tensor.size)}")
            return _Task(log, _name)
        monkeypatch.setattr(breakdown.dist, name, call)


def test_sharding_calls_each_timed_as_its_nccl_tests_op_and_bytes_then_restored(monkeypatch):
    """The sharding optimizer's own spellings: positional (stage1: ``paddle.distributed.reduce(g_var, dst=...)``)
    and keyword (stage2: ``dist.reduce(tensor=..., ...)``); each waited for inside its timing; any later call
    untouched."""
    from training.breakdown import Collectives

    log: list = []
    _stand_ins(monkeypatch, log)
    originals = {name: getattr(breakdown.dist, name) for name in breakdown.SHARDING_CALLS}
    inner = Collectives(lambda: log.append("sync"), lambda: log.append("barrier"))
    grad, param = paddle.ones([3, 4]), paddle.ones([5], dtype="float64")
    with breakdown.timed_calls(inner):
        import paddle.distributed as dist  # what the optimizers reach: the module attribute, looked up per call

        paddle.distributed.reduce(grad, dst=1, group=None, sync_op=True)
        dist.broadcast(tensor=param, src=0, group=None, sync_op=False)
        dist.all_reduce(paddle.ones([2]))
    assert inner.ops == [("reduce", 12 * 4), ("broadcast", 5 * 8), ("allreduce", 2 * 4)]
    assert log == ["sync", "barrier", "reduce 12", "wait reduce", "sync",
                   "sync", "barrier", "broadcast 5", "wait broadcast", "sync",
                   "sync", "barrier", "all_reduce 2", "wait all_reduce", "sync"]
    assert {name: getattr(breakdown.dist, name) for name in breakdown.SHARDING_CALLS} == originals
    log.clear()
    paddle.distributed.reduce(grad, dst=1)
    assert log == ["reduce 12"] and len(inner.ops) == 3  # outside the phase: the optimizer's own call


def test_a_collective_inside_a_timed_one_is_not_timed_twice_and_a_failure_restores(monkeypatch):
    from training.breakdown import Collectives

    log: list = []
    _stand_ins(monkeypatch, log)
    inner_reduce = breakdown.dist.reduce

    def broadcast_that_reduces(tensor=None, *args, **kwargs):
        breakdown.dist.reduce(tensor)  # patched at this point: must go straight to the original
        raise RuntimeError("boom")

    monkeypatch.setattr(breakdown.dist, "broadcast", broadcast_that_reduces)
    inner = Collectives(lambda: None, lambda: None)
    with pytest.raises(RuntimeError, match="boom"), breakdown.timed_calls(inner):
        paddle.distributed.broadcast(paddle.ones([4]), src=0)
    assert log == ["reduce 4"] and inner.ops == []
    assert breakdown.dist.reduce is inner_reduce and breakdown.dist.broadcast is broadcast_that_reduces


def test_sharded_phases_time_the_optimizer_steps_collectives_and_stage2s_backward(monkeypatch):
    """Stage1: compute runs plain (no collective of fleet's in it), the optimizer step's reduces and broadcasts go
    through Collectives; stage2: its backward's reduces too. The loss scale's count all-reduce stays compute."""
    from types import SimpleNamespace

    from training.contract.spec import DebugSpec

    log: list = []
    _stand_ins(monkeypatch, log)
    monkeypatch.setattr(breakdown.dist, "barrier", lambda group=None: log.append(f"barrier {group}"))

    def worker(stage):
        def loss_scale(batches):
            paddle.distributed.all_reduce(paddle.ones([1]))  # instruction data's global count
            return 1.0

        return SimpleNamespace(
            layout=SimpleNamespace(pp=1, tp=1, sharding=2, dp=1, data=2), world=2, on_cpu=True,
            spec=SimpleNamespace(debug=DebugSpec(), parallel=SimpleNamespace(sharding=stage)),
            hcg=SimpleNamespace(get_sharding_parallel_group=lambda: "G"), fetch=list, loss_scale=loss_scale,
            compute_delay=lambda: None,
            forward_backward=lambda batches, scale, sync: paddle.distributed.reduce(paddle.ones([3]), dst=0),
            optimizer_step=lambda: paddle.distributed.broadcast(paddle.ones([6]), src=1),
            optimizer=SimpleNamespace(clear_grad=lambda: None))

    for stage, ops in (("stage1", [("broadcast", 24)]), ("stage2", [("reduce", 12), ("broadcast", 24)])):
        got = breakdown.phases(worker(stage))
        assert got.group_size == 2 and got.communicate() == []
        got.compute([])
        got.optimize()
        assert got.inner.ops == ops, stage
        assert log.count("barrier G") == len(ops)  # each timed one after a barrier over the sharding group
        log.clear()


def test_paddle_layouts_not_measured_say_why():
    from types import SimpleNamespace

    def layout(sharding=2, dp=1):
        return SimpleNamespace(pp=1, tp=1, sharding=sharding, dp=dp)

    assert breakdown.uncovered(layout(), "stage1") is None and breakdown.uncovered(layout(), "stage2") is None
    assert breakdown.uncovered(layout(), "stage3") == (
        "not measured for sharding stage3 on paddle: its parameter all-gathers go through the process group's own "
        "all_gather method (group_sharded_stage3's _all_gather), which no paddle.distributed function sees, so they "
        "cannot be timed one by one")
    assert breakdown.uncovered(layout(dp=2), "stage1").startswith(
        "not measured for sharding with data parallel beside it on paddle (sharding degree 2, data-parallel degree "
        "2): the all-reduces span the data-parallel group and the reduces and broadcasts the sharding group")


def test_sharding_reduces_and_broadcasts_are_priced_at_bytes_over_their_stored_busbw_exactly():
    """nccl-tests' reduce and broadcast: busbw = algbw (factor 1 for any n), so time = bytes / busbw of each
    operation's own stored micro case at the nearest size; a missing reduce case is named, nothing filled in."""
    import math

    from run_benchmarks.results import breakdown as results, breakdown_words
    from training.contract import perflog

    from .test_breakdown_sharded_views import micro_row

    ops, sizes = ["reduce", "reduce", "broadcast", "broadcast"], [1 << 20, 8 << 20, 8 << 20, 1 << 20]
    records = [perflog.BreakdownRecord(rank=r, steps=1, data_s=[0.0], compute_s=[0.1], wait_s=[0.0],
                                       communication_s=[0.02], optimizer_s=[0.0], step_s=[0.12], bucket_bytes=sizes,
                                       collective_ops=ops, group_size=2, method="m") for r in (0, 1)]
    metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.005}
    rows = [micro_row("reduce", [(1 << 20, 1.5), (8 << 20, 3.0)]), micro_row("broadcast", [(1 << 20, 2.0),
                                                                                            (8 << 20, 4.0)])]
    nodes = [{"host": "h", "environment": {"hostname": "h"}}]
    measure = "accelbench run {op}:paddle:cpu:1:2"
    tb = results.time_breakdown(records, metrics, (10.0, "c"), (None, ""), nodes, rows, measure)
    expected = tb["expected"]
    assert expected["communication_s"] == math.fsum([(1 << 20) / 1.5e9, (8 << 20) / 3e9, (8 << 20) / 4e9,
                                                     (1 << 20) / 2e9])
    assert expected["communication_formula"].startswith("reduce: time = bytes x 1 / busbw(reduce); broadcast: "
                                                        "time = bytes x 1 / busbw(broadcast)")
    assert "(2 reduce + 2 broadcast, 18,874,368 bytes)" in breakdown_words.describe(tb)[0]
    lacking = results.time_breakdown(records, metrics, (10.0, "c"), (None, ""), nodes, rows[1:], measure)
    assert lacking["expected"]["communication_s"] is None
    assert lacking["expected"]["missing"] == ["no reduce busbw stored for 2 ranks on these hosts: run "
                                              "`accelbench run reduce:paddle:cpu:1:2`"]

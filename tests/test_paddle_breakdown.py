"""Paddle's explicit collective paths for the time breakdown (training/paddle/breakdown.py), in one process: data
parallel's reducer parameter list, its buckets all-reduced in the reducer's order and averaged back into the
gradients; fleet's phases (tensor parallel, sharding) with forward+backward and the optimizer step under the
process-group wrappers (those themselves: tests/test_paddle_breakdown_collectives.py); the expected time of
sharding's reduces and broadcasts (bytes x 1 / the stored busbw of each, exactly) and of Paddle's tensor
parallel and sharding beside data parallel (each collective at its own group's busbw, exactly); what stays
uncovered and why. Paddle's by-construction TP count is tests/test_breakdown_tp_pricing.py's; the proofs on
real ranks (a collective delay grows communication by C x D) are tests/test_paddle_breakdown_launch.py and
tests/test_paddle_breakdown_fleet_launch.py."""
from __future__ import annotations

from types import SimpleNamespace

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
    from training.contract.spec import DebugSpec

    worker = SimpleNamespace(layout=SimpleNamespace(pp=1, tp=1, sharding=1, dp=world, data=world), world=world,
                             on_cpu=True,
                             model=_net(), spec=SimpleNamespace(debug=DebugSpec(),
                                                                parallel=SimpleNamespace(sharding="none")), fetch=list,
                             optimizer_step=lambda: None, optimizer=SimpleNamespace(clear_grad=lambda: None))
    got = breakdown.phases(worker)
    if expected:
        assert got == expected
    else:
        assert got.group_size == 1 and got.communicate() == [] and got.align() is None


def test_fleet_phases_time_forward_backward_and_the_optimizer_step_at_the_process_group(monkeypatch):
    """Tensor parallel or sharding: compute's forward+backward and the optimizer step each run under the
    process-group wrappers (tests/test_paddle_breakdown_collectives.py), each collective with its own group's
    size; the loss scale's count all-reduce stays compute; no explicit communication phase; a world barrier
    aligns the ranks; the record's group_size is the data degree."""
    from training.contract.spec import DebugSpec

    from .test_paddle_breakdown_collectives import _Gloo

    log: list = []
    tp, dp = _Gloo(log, 2), _Gloo(log, 4)
    monkeypatch.setattr(breakdown.collectives, "process_group_classes", lambda hcg: {_Gloo})
    monkeypatch.setattr(breakdown.dist, "barrier", lambda group=None: log.append(f"world barrier {group}"))
    worker = SimpleNamespace(
        layout=SimpleNamespace(pp=1, tp=2, sharding=2, dp=1, data=2), world=4, on_cpu=True, hcg=None,
        spec=SimpleNamespace(debug=DebugSpec(), parallel=SimpleNamespace(sharding="stage1")), fetch=list,
        loss_scale=lambda batches: tp.all_reduce(paddle.ones([1]), None, True) and 1.0,  # instruction data's count
        compute_delay=lambda: None,
        forward_backward=lambda batches, scale, sync: tp.all_reduce_on_calc_stream(paddle.ones([3])),
        optimizer_step=lambda: dp.all_reduce(paddle.ones([6]), None, True),
        optimizer=SimpleNamespace(clear_grad=lambda: None))
    got = breakdown.fleet_phases(worker)
    assert got.group_size == 2 and got.communicate() == []
    got.compute([])
    got.optimize()
    got.align()
    assert got.inner.ops == [("allreduce", 12), ("allreduce", 24)] and got.inner.ranks == [2, 4]
    assert log.count("barrier 2") == log.count("barrier 4") == 1 and log[-1] == "world barrier None"


def test_sharding_reduces_and_broadcasts_are_priced_at_bytes_over_their_stored_busbw_exactly():
    """nccl-tests' reduce and broadcast: busbw = algbw (factor 1 for any n), so time = bytes / busbw of each
    operation's own stored micro case at the nearest size; a missing reduce case is named, nothing filled in."""
    import math

    from run_benchmarks.results.breakdown import step as results, words as breakdown_words
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


def test_paddle_tensor_parallel_and_sharding_beside_data_parallel_are_priced_at_each_groups_busbw_exactly():
    """Canned records shaped like the real ranks' (tests/test_paddle_breakdown_fleet_launch.py): TP2's all-reduces
    and broadcasts, sharding 2 x dp 2's reduces, all-reduce and broadcasts, every one over a group of 2 in a round of
    2 or 4 ranks: time = bytes x factor(n) / the stored busbw of that op for 2 ranks at the nearest size, summed
    exactly; a figure stored for 4 ranks is never used for a group of 2, and a missing one names a 2-rank case."""
    import math

    from run_benchmarks.results.breakdown import step as results

    from .test_breakdown_sharded_views import micro_row
    from .test_breakdown_tp_pricing import METRICS, NODES, tp_record

    act, loss, ids, small, positions = 131072, 1024, 2048, 512, 65536
    tp = [("allreduce", act)] * 14 + [("allreduce", loss)] * 3 + [("broadcast", ids)] * 2 + \
        [("broadcast", small)] * 14 + [("broadcast", positions)]
    records = [tp_record(r, [op for op, _ in tp], [b for _, b in tp], [2] * len(tp)) for r in (0, 1)]
    rows = [micro_row("allreduce", [(1024, 0.5), (131072, 2.0)]), micro_row("broadcast", [(512, 0.25), (65536, 1.0)]),
            micro_row("allreduce", [(1024, 50.0), (131072, 50.0)], ranks=4)]
    got = results.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES, rows,
                                 "accelbench run {op}:paddle:cpu:1:2")
    assert got["expected"]["communication_s"] == math.fsum(
        [act * 1 / 2e9] * 14 + [loss * 1 / 0.5e9] * 3 + [ids / 0.25e9] * 2 + [small / 0.25e9] * 14 + [positions / 1e9])
    n, owned = 36, 1114112
    ops = ["reduce"] * n + ["allreduce"] + ["broadcast"] * n
    sizes = [4096] * n + [owned] + [4096] * n
    records = [tp_record(r, ops, sizes, [2] * len(ops), group=4) for r in range(4)]
    rows += [micro_row("reduce", [(4096, 1.5)]), micro_row("broadcast", [(4096, 3.0)]),
             micro_row("allreduce", [(1 << 20, 4.0)])]
    command = "accelbench run {op}:paddle:cpu:1:4"
    got = results.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES, rows, command)
    assert got["expected"]["communication_s"] == math.fsum([4096 / 1.5e9] * n + [owned * 1 / 4e9] + [4096 / 3e9] * n)
    assert got["measured"]["group_sizes"] == [2] * (2 * n + 1)
    lacking = results.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES,
                                     [row for row in rows if row["case_name"] != "reduce"], command)
    assert lacking["expected"]["missing"] == ["no reduce busbw stored for 2 ranks on these hosts: run "
                                              "`accelbench run reduce:paddle:cpu:1:2`"]


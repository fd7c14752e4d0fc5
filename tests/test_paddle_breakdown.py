"""Paddle data parallel's explicit gradient path for the time breakdown (training/paddle/breakdown.py), in one
process: the reducer's parameter list, its buckets all-reduced in the reducer's order and averaged back into the
gradients. The two-rank proof (a collective delay grows communication by C x D) is
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
                             model=_net(), spec=SimpleNamespace(debug=DebugSpec()), fetch=list,
                             optimizer_step=lambda: None, optimizer=SimpleNamespace(clear_grad=lambda: None))
    got = breakdown.phases(worker)
    if expected:
        assert got == expected
    else:
        assert got.group_size == 1 and got.communicate() == [] and got.align() is None

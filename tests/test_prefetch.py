"""Synthetic batches are prefetched off the timed step (training/data/prefetch.py) with the very same tokens,
and the workers' ``fetch`` only fetches: the loss scale's all-reduce is no longer counted in ``data_s``."""
from types import SimpleNamespace

import numpy as np
import pytest

from training.data.batches import Batches
from training.data.markov import MarkovTokens
from training.data.prefetch import Prefetcher

SHAPE = dict(vocab_size=64, seq_len=16, micro_batch_size=3, seed=7, dp_rank=1, dp_size=2)


def test_prefetched_markov_batches_are_the_unprefetched_ones_in_order():
    plain = Batches("synthetic", MarkovTokens(**SHAPE))
    ahead = Batches("synthetic", MarkovTokens(**SHAPE), prefetch=True)
    try:
        for _ in range(6):
            a, b = plain.next_batch(), ahead.next_batch()
            assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
            assert a.real_tokens == b.real_tokens
        assert ahead.description == plain.description
    finally:
        ahead.close()
    assert not ahead._reader._thread.is_alive()


def test_the_queue_is_bounded_and_close_joins_the_thread():
    class Counting:
        description: dict = {}
        made = 0

        def next_batch(self):
            self.made += 1
            return self.made

    source = Counting()
    reader = Prefetcher(source, depth=2)
    assert reader.next_batch() == 1 and reader.next_batch() == 2
    reader.close()
    assert not reader._thread.is_alive()
    assert source.made <= 2 + 2 + 1  # two taken, at most two queued and one waiting to be put
    with pytest.raises(RuntimeError, match="closed"):
        reader.next_batch()


def test_an_error_in_the_thread_is_raised_in_the_caller_at_its_batch():
    class Failing:
        description: dict = {}
        made = 0

        def next_batch(self):
            self.made += 1
            if self.made == 2:
                raise ValueError("bad batch")
            return self.made

    reader = Prefetcher(Failing())
    assert reader.next_batch() == 1
    with pytest.raises(ValueError, match="bad batch"):
        reader.next_batch()
    reader.close()
    assert not reader._thread.is_alive()


def _worker(instruction: bool):
    """A stand-in with what ``fetch`` and ``loss_scale`` read; ``_global_count`` records its calls."""
    from training.contract.spec import DebugSpec

    calls = []
    batch = SimpleNamespace(supervised_tokens=5, padded_to=lambda width: batch)
    return calls, SimpleNamespace(
        spec=SimpleNamespace(train=SimpleNamespace(gradient_accumulation_steps=2), debug=DebugSpec(),
                             model=SimpleNamespace(seq_len=16), data=SimpleNamespace(instruction=instruction)),
        data=SimpleNamespace(next_batch=lambda: batch), parallel=SimpleNamespace(pipeline=None, dp_size=2),
        layout=SimpleNamespace(data=2), _global_count=lambda local: calls.append(local) or 40)


@pytest.mark.parametrize("module", ["training.torch.train", "training.paddle.train"])
def test_fetch_runs_no_global_count_and_loss_scale_does(module):
    mod = pytest.importorskip(module)
    worker_class = mod.TorchWorker if "torch" in module else mod.PaddleWorker
    calls, worker = _worker(instruction=True)
    batches = worker_class.fetch(worker)
    assert len(batches) == 2 and calls == []  # fetching only: nothing for data_s to wait on
    assert worker_class.loss_scale(worker, batches) == 2 / 40 and calls == [10]


def test_the_breakdown_compute_phase_takes_the_loss_scale():
    pytest.importorskip("paddle")
    from training.contract.spec import DebugSpec
    from training.paddle import breakdown
    order = []
    worker = SimpleNamespace(
        layout=SimpleNamespace(pp=1, tp=1, sharding=1, data=1), world=1, model=object(),
        spec=SimpleNamespace(debug=DebugSpec()),
        fetch=list, optimizer_step=lambda: None, optimizer=SimpleNamespace(clear_grad=lambda: None),
        loss_scale=lambda batches: order.append("scale") or 0.5,
        compute_delay=lambda: order.append("delay"),
        forward_backward=lambda batches, scale, sync: order.append(("fb", scale, sync)))
    breakdown.phases(worker).compute(["b"])
    assert order == ["scale", "delay", ("fb", 0.5, False)]

"""The default synthetic source (training/data/markov.py): its loss floor, determinism, layouts and frameworks.

In-process, NumPy only: what the loss-curve references (issue 34) stand on is that the data have structure,
a known entropy rate, and are the same tokens whoever reads them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from training.contract.spec import DataSpec, WorkloadSpec
from training.data import markov
from training.data.batches import open_batches
from training.data.sampling import GlobalSampler

VOCAB, SEQ = 64, 16


def test_the_entropy_rate_is_the_slot_entropy_and_every_row_has_distinct_successors():
    succ, pi = markov.chain(VOCAB)
    assert all(len(set(row)) == markov.SUCCESSORS for row in succ.tolist())
    w = markov.slot_weights()
    assert markov.ENTROPY_RATE_NATS == pytest.approx(-(w * np.log(w)).sum(), abs=1e-12)
    assert markov.ENTROPY_RATE_NATS == pytest.approx(1.3606, abs=1e-4)
    assert pi.sum() == pytest.approx(1.0) and (pi >= 0).all()
    moved = np.bincount(succ.ravel(), weights=(pi[:, None] * w).ravel(), minlength=VOCAB)
    assert np.abs(moved - pi).max() < 1e-9  # stationary


def test_measured_conditional_entropy_matches_the_stated_rate():
    tokens = markov.MarkovTokens(VOCAB, 64, 1, seed=3).samples(range(400))
    pairs = np.stack([tokens[:, :-1].ravel(), tokens[:, 1:].ravel()], axis=1)
    joint = np.zeros((VOCAB, VOCAB))
    np.add.at(joint, (pairs[:, 0], pairs[:, 1]), 1)
    rows = joint.sum(1, keepdims=True)
    cond = np.where(joint > 0, joint / np.maximum(rows, 1), 1.0)
    measured = float(-(joint * np.log(cond)).sum() / joint.sum())
    assert measured == pytest.approx(markov.ENTROPY_RATE_NATS, abs=0.05)
    assert measured < math.log(VOCAB) - 2  # far below uniform: a model has something to learn


def test_samples_depend_on_seed_and_global_index_only():
    one = markov.MarkovTokens(VOCAB, SEQ, 4, seed=7)
    again = markov.MarkovTokens(VOCAB, SEQ, 4, seed=7)
    other = markov.MarkovTokens(VOCAB, SEQ, 4, seed=8)
    a, b, c = one.next_batch()[0], again.next_batch()[0], other.next_batch()[0]
    assert (a == b).all() and not (a == c).all()
    ranks = [markov.MarkovTokens(VOCAB, SEQ, 2, seed=7, dp_rank=r, dp_size=2).next_batch()[0] for r in (0, 1)]
    assert (np.concatenate(ranks) == a).all()  # two data ranks together read one process's batch


def _spec(**data) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"model": {"family": "gpt2", "n_layer": 1, "n_head": 2, "d_model": 16,
                                                  "vocab_size": VOCAB, "seq_len": SEQ},
                                        "train": {"micro_batch_size": 2, "steps": 2, "warmup_steps": 1},
                                        "data": data})


class _FrameworkUniform(GlobalSampler):
    """Stands in for a framework's own uniform source (torch's generator or NumPy's): distinct per framework."""
    description = {"distribution": "uniform token ids"}

    def __init__(self, *args, offset: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.offset = offset

    def next_batch(self):
        x = (np.arange(self.micro_batch_size * (self.seq_len + 1)).reshape(self.micro_batch_size, -1)
             + self.offset) % self.vocab_size
        return x[:, :-1], x[:, 1:]


def test_markov_is_the_default_and_the_same_tokens_whichever_framework_reads_them():
    spec = _spec()
    assert spec.data.synthetic == "markov"
    torch_side = open_batches(spec, 0, 1, lambda **kw: _FrameworkUniform(**kw, offset=0))
    paddle_side = open_batches(spec, 0, 1, lambda **kw: _FrameworkUniform(**kw, offset=5))
    assert torch_side.description["distribution"] == "markov"
    assert (torch_side.next_batch().inputs == paddle_side.next_batch().inputs).all()
    uniform = open_batches(_spec(synthetic="uniform"), 0, 1, lambda **kw: _FrameworkUniform(**kw))
    assert uniform.description["distribution"] == "uniform token ids"


def test_the_data_seed_changes_the_samples_not_the_init_seed():
    base, reseeded = _spec(), _spec(seed=99)
    assert reseeded.train.seed == base.train.seed
    a = open_batches(base, 0, 1, _FrameworkUniform).next_batch().inputs
    b = open_batches(reseeded, 0, 1, _FrameworkUniform).next_batch().inputs
    assert not (a == b).all()
    assert open_batches(reseeded, 0, 1, _FrameworkUniform).description["seed"] == 99


def test_data_synthetic_with_a_file_source_is_refused():
    with pytest.raises(ValueError, match="data.synthetic"):
        DataSpec(source="tokens", path="x", synthetic="uniform")

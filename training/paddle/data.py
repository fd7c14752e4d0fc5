"""Pretraining batches for Paddle workers, from NumPy sources (no torch in a Paddle image).

``tokens`` reads the same ``<prefix>_ids.npy`` / ``_idx.npz`` file, in the same
sample order, as the torch workers: that is what the Paddle-vs-PyTorch parity
test relies on. ``synthetic`` draws uniform ids per global sample from NumPy's
generator (a different stream from torch's; the cost per token is the same).
"""
from __future__ import annotations

import numpy as np

from training.data.sampling import GlobalSampler
from training.data.token_file import TokenFileDataset
from training.contract.spec import WorkloadSpec


class SyntheticArrays(GlobalSampler):
    @property
    def description(self) -> dict:
        return {"distribution": "uniform token ids"}

    def sample(self, index: int) -> np.ndarray:
        return np.random.default_rng([self.seed % 2**32, index]).integers(0, self.vocab_size, self.seq_len + 1)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        tokens = np.stack([self.sample(index) for index in self.next_indices()]).astype(np.int64)
        return tokens[:, :-1], tokens[:, 1:]


def open_pretraining_data(spec: WorkloadSpec, dp_rank: int, dp_size: int):
    model, train = spec.model, spec.train
    shape = dict(vocab_size=model.vocab_size, seq_len=model.seq_len, micro_batch_size=train.micro_batch_size,
                 seed=train.seed, dp_rank=dp_rank, dp_size=dp_size)
    if spec.data.source == "tokens":
        return TokenFileDataset(spec.data.path, **shape)
    return SyntheticArrays(**shape)  # the plan admits only pretraining sources for Paddle

"""Batches for Paddle workers: the shared data side (``training/data/batches.py``), NumPy only (no torch in
a Paddle image).

Instruction data (finetune, lora) is batched, padded and counted exactly as for
the torch workers, by the same code. ``tokens`` reads the same ``<prefix>_ids.npy`` / ``_idx.npz`` file, in the same
sample order, as the torch workers: that is what the Paddle-vs-PyTorch parity
test relies on. ``synthetic`` draws uniform ids per global sample from NumPy's
generator (a different stream from torch's; the cost per token is the same).
"""
from __future__ import annotations

import numpy as np

from training.data.batches import Batches, open_batches
from training.data.sampling import GlobalSampler
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


def open_data(spec: WorkloadSpec, dp_rank: int, dp_size: int) -> Batches:
    """The spec's source as the shared ``Batches`` (the torch worker's padding and counting)."""
    return open_batches(spec, dp_rank, dp_size, SyntheticArrays)

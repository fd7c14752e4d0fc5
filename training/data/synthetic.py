"""Synthetic tokens: uniform random ids (``data.synthetic: uniform``; the default is markov.py's chain),
reproducible per seed and per global sample.

Each sample is drawn from its own generator, seeded by its global index, so
the union of what the data-parallel ranks see in a step is exactly what one
process with the whole batch would see, in any layout. That is what lets the
parity tests compare strategies loss for loss. Uniform tokens cost the same
FLOPs as text, so throughput holds; the loss only tells that training runs.
"""
from __future__ import annotations

import torch

from training.data.sampling import GlobalSampler


class SyntheticTokens(GlobalSampler):
    @property
    def description(self) -> dict:
        return {"distribution": "uniform token ids"}

    def sample(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return torch.randint(0, self.vocab_size, (self.seq_len + 1,), generator=generator)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.stack([self.sample(index) for index in self.next_indices()])
        return tokens[:, :-1], tokens[:, 1:]

"""Synthetic tokens: uniform random ids, reproducible per seed and per global sample.

Each sample is drawn from its own generator, seeded by its global index, so
the union of what the data-parallel ranks see in a step is exactly what one
process with the whole batch would see, in any layout. That is what lets the
parity tests compare strategies loss for loss. Uniform tokens cost the same
FLOPs as text, so throughput holds; the loss only tells that training runs.
"""
from __future__ import annotations

import torch


class SyntheticTokens:
    def __init__(self, vocab_size: int, seq_len: int, micro_batch_size: int, seed: int,
                 dp_rank: int = 0, dp_size: int = 1):
        self.vocab_size, self.seq_len, self.micro_batch_size = vocab_size, seq_len, micro_batch_size
        self.seed, self.dp_rank, self.dp_size = seed, dp_rank, dp_size
        self.micro_batches_taken = 0

    @property
    def description(self) -> dict:
        return {"distribution": "uniform token ids"}

    def sample(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return torch.randint(0, self.vocab_size, (self.seq_len + 1,), generator=generator)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        first = (self.micro_batches_taken * self.dp_size + self.dp_rank) * self.micro_batch_size
        self.micro_batches_taken += 1
        tokens = torch.stack([self.sample(first + j) for j in range(self.micro_batch_size)])
        return tokens[:, :-1], tokens[:, 1:]

"""Synthetic tokens: uniform random ids, different per rank, reproducible per seed.

Uniform tokens cost the same FLOPs as text, so throughput figures hold; the loss
only tells that training runs (it falls towards ln(vocab_size)).
"""
from __future__ import annotations

import torch


class SyntheticTokens:
    def __init__(self, vocab_size: int, seq_len: int, batch_size: int, seed: int, rank: int):
        self.vocab_size, self.seq_len, self.batch_size = vocab_size, seq_len, batch_size
        self._generator = torch.Generator().manual_seed(seed * 1_000_003 + rank)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(
            0, self.vocab_size, (self.batch_size, self.seq_len + 1), generator=self._generator
        )
        return tokens[:, :-1], tokens[:, 1:]

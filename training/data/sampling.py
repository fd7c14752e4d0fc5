"""Which global samples a data-parallel rank takes next: the rule every data source shares.

Micro-batch ``m`` of data rank ``r`` (of ``dp_size``) is global samples
``(m * dp_size + r) * micro_batch_size ...`` + ``micro_batch_size``, so the
ranks together read exactly what one process with the whole batch reads, in
any layout and either framework. Framework-neutral (no torch, no paddle).
"""
from __future__ import annotations


class GlobalSampler:
    def __init__(self, vocab_size: int, seq_len: int, micro_batch_size: int, seed: int,
                 dp_rank: int = 0, dp_size: int = 1):
        self.vocab_size, self.seq_len, self.micro_batch_size = vocab_size, seq_len, micro_batch_size
        self.seed, self.dp_rank, self.dp_size = seed, dp_rank, dp_size
        self.micro_batches_taken = 0

    def next_indices(self) -> range:
        """The global sample indices of this rank's next micro-batch."""
        first = (self.micro_batches_taken * self.dp_size + self.dp_rank) * self.micro_batch_size
        self.micro_batches_taken += 1
        return range(first, first + self.micro_batch_size)

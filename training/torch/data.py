"""Micro-batches as torch tensors, from any of the framework-neutral sources in ``training/data``.

Every source hands out micro-batches by global sample index, so the data-parallel
ranks together see exactly the batch one process would: that is what lets the
parity tests compare layouts loss for loss, with real data as with synthetic.
Here they become tensors, with what the step record needs: how much is padding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from training.data.instruction import IGNORE_INDEX, PAD, InstructionDataset, alpaca_sample
from training.data.synthetic import SyntheticTokens
from training.data.token_file import DataFormatError, TokenFileDataset
from training.contract.spec import WorkloadSpec

__all__ = ["Batch", "Batches", "DataFormatError", "open_dataset"]


@dataclass(frozen=True)
class Batch:
    inputs: torch.Tensor
    targets: torch.Tensor
    real_tokens: int  # input tokens that are not padding

    @property
    def padded_tokens(self) -> int:
        return self.inputs.numel()

    def padded_to(self, width: int) -> "Batch":
        """The same batch, padded on the right to ``width`` positions (padding is never supervised)."""
        extra = width - self.inputs.shape[1]
        if extra == 0:
            return self
        pad = torch.nn.functional.pad
        return Batch(pad(self.inputs, (0, extra), value=PAD), pad(self.targets, (0, extra), value=IGNORE_INDEX),
                     self.real_tokens)

    @property
    def supervised_tokens(self) -> int:
        """Positions that carry a loss (not prompt, not padding)."""
        return int(self.targets.ne(IGNORE_INDEX).sum())


Source = Union[SyntheticTokens, TokenFileDataset, InstructionDataset]


class Batches:
    """One interface over every source: the next micro-batch, and how much of it is padding."""

    def __init__(self, kind: str, source: Source):
        self.source = source
        self.description = {"source": kind, **source.description}

    def next_batch(self) -> Batch:
        inputs, targets = self.source.next_batch()
        if not isinstance(inputs, torch.Tensor):  # token files hand out NumPy arrays
            inputs, targets = torch.from_numpy(inputs), torch.from_numpy(targets)
        padded = isinstance(self.source, InstructionDataset)
        return Batch(inputs, targets, self.source.last_real_tokens if padded else inputs.numel())


def open_dataset(spec: WorkloadSpec, dp_rank: int, dp_size: int) -> Batches:
    data, model, train = spec.data, spec.model, spec.train
    shape = dict(vocab_size=model.vocab_size, seq_len=model.seq_len, micro_batch_size=train.micro_batch_size,
                 seed=train.seed, dp_rank=dp_rank, dp_size=dp_size)
    if data.source == "synthetic":
        source = SyntheticTokens(**shape)
    elif data.source == "tokens":
        source = TokenFileDataset(data.path, **shape)
    elif data.source == "instruction":
        source = InstructionDataset(data.path, **shape)
    else:
        source = InstructionDataset(None, **shape, records=alpaca_sample(data.records, train.seed))
    return Batches(data.source, source)

"""The data side both workers share: micro-batches as NumPy arrays, and what a step record counts of them.

Every source (``synthetic``, ``token_file``, ``instruction``) hands out
micro-batches by global sample index, so the data-parallel ranks together see
exactly the batch one process would, in either framework. Here a source becomes
``Batch`` objects that know their padding, and ``StepCounts`` turns one step's
micro-batches into the step record's figures: tokens (padding included),
effective tokens (padding excluded) and the FLOPs of the real tokens, each at
the width its batch ran at. ``training/torch/data.py`` and
``training/paddle/data.py`` only choose their synthetic source (torch's
generator, NumPy's) and turn arrays into tensors: padding and counting exist
once. Framework-neutral: no torch, no paddle.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from training.contract import flops
from training.contract.spec import WorkloadSpec
from training.data.markov import MarkovTokens
from training.data.prefetch import Prefetcher
from training.data.instruction import IGNORE_INDEX, PAD, InstructionDataset, alpaca_sample
from training.data.token_file import DataFormatError, TokenFileDataset

__all__ = ["Batch", "Batches", "DataFormatError", "StepCounts", "open_batches"]


@dataclass(frozen=True)
class Batch:
    inputs: np.ndarray  # int64 [micro_batch, width]
    targets: np.ndarray  # int64, IGNORE_INDEX where nothing is supervised (prompt, padding)
    real_tokens: int  # input tokens that are not padding

    @property
    def width(self) -> int:
        return int(self.inputs.shape[1])

    @property
    def padded_tokens(self) -> int:
        return int(self.inputs.size)

    @property
    def supervised_tokens(self) -> int:
        """Positions that carry a loss (not prompt, not padding)."""
        return int(np.count_nonzero(self.targets != IGNORE_INDEX))

    def padded_to(self, width: int) -> "Batch":
        """The same batch, padded on the right to ``width`` positions (padding is never supervised)."""
        extra = width - self.width
        if extra == 0:
            return self
        return Batch(np.pad(self.inputs, ((0, 0), (0, extra)), constant_values=PAD),
                     np.pad(self.targets, ((0, 0), (0, extra)), constant_values=IGNORE_INDEX), self.real_tokens)


class Batches:
    """One interface over every source: the next micro-batch, and how much of it is padding."""

    def __init__(self, kind: str, source, prefetch: bool = False):
        self.source = source
        self.description = {"source": kind, **source.description}
        self._reader = Prefetcher(source) if prefetch else source  # same batches, same order: prefetch.py

    def next_batch(self) -> Batch:
        inputs, targets = self._reader.next_batch()
        # np.asarray: torch's synthetic source hands out CPU tensors (a view, no copy)
        inputs, targets = np.asarray(inputs), np.asarray(targets)
        padded = isinstance(self.source, InstructionDataset)
        return Batch(inputs, targets, self.source.last_real_tokens if padded else int(inputs.size))

    def close(self) -> None:
        """Stop and join the prefetch thread, if any."""
        if isinstance(self._reader, Prefetcher):
            self._reader.close()


def open_batches(spec: WorkloadSpec, dp_rank: int, dp_size: int, synthetic: Callable) -> Batches:
    """The spec's data source for data rank ``dp_rank`` of ``dp_size``; ``synthetic`` builds the framework's
    uniform-token source (it takes the same keyword arguments as the others). The Markov source is NumPy's,
    shared: the same tokens in either framework. Synthetic batches are made ahead in a thread (``prefetch.py``),
    off the timed step; file sources are not (``last_real_tokens`` must match the batch just read)."""
    data, model, train = spec.data, spec.model, spec.train
    shape = dict(vocab_size=model.vocab_size, seq_len=model.seq_len, micro_batch_size=train.micro_batch_size,
                 seed=train.seed if data.seed is None else data.seed, dp_rank=dp_rank, dp_size=dp_size)
    if data.source == "synthetic":
        source = synthetic(**shape) if data.synthetic == "uniform" else MarkovTokens(**shape)
    elif data.source == "tokens":
        source = TokenFileDataset(data.path, **shape)
    elif data.source == "instruction":
        source = InstructionDataset(data.path, **shape)
    else:
        source = InstructionDataset(None, **shape, records=alpaca_sample(data.records, train.seed))
    return Batches(data.source, source, prefetch=data.source == "synthetic")


class StepCounts:
    """A step's figures for ``harness.StepWork`` from its micro-batches, the same in every framework."""

    def __init__(self, spec: WorkloadSpec):
        self.spec = spec

    @functools.cache
    def flops_at_width(self, width: int) -> int:
        """Model FLOPs per token at ``width``: instruction batches are padded to their own width, not seq_len."""
        return flops.flops_per_token(self.spec.model.model_copy(update={"seq_len": width}), self.spec.train)[0]

    def __call__(self, batches: list[Batch]) -> dict:
        """``tokens`` (padding included), and for instruction data ``effective_tokens`` (padding excluded) and
        ``flops`` (only real tokens count, each at the width its batch ran at: padding is no model work)."""
        instruction = self.spec.data.instruction
        return dict(tokens=sum(b.padded_tokens for b in batches),
                    effective_tokens=sum(b.real_tokens for b in batches) if instruction else None,
                    flops=sum(b.real_tokens * self.flops_at_width(b.width) for b in batches) if instruction else None)

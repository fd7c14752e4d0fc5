"""Micro-batches for the PyTorch worker: the shared data side (``training/data/batches.py``) with torch's
synthetic source.

Padding, supervision and the step's token counts are ``training.data.batches``'s,
the same as the Paddle worker's; batches stay NumPy arrays until
``training/torch/parallel.py`` moves them to the device (``as_tensors``).
"""
from __future__ import annotations

import torch

from training.contract.spec import WorkloadSpec
from training.data.batches import Batch, Batches, DataFormatError, StepCounts, open_batches
from training.data.synthetic import SyntheticTokens

__all__ = ["Batch", "Batches", "DataFormatError", "StepCounts", "as_tensors", "open_dataset"]


def open_dataset(spec: WorkloadSpec, dp_rank: int, dp_size: int) -> Batches:
    return open_batches(spec, dp_rank, dp_size, SyntheticTokens)


def as_tensors(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's (inputs, targets) as int64 CPU tensors (no copy)."""
    return torch.as_tensor(batch.inputs), torch.as_tensor(batch.targets)

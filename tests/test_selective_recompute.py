"""Selective activation checkpointing at a stated frequency (``train.recompute: selective`` with
``train.recompute_every: k``: blocks 0, k, 2k, ... recompute their activations in backward; the source of the
mfu table's selective-AC rows writes 1/8 and 1/4), against none and full, on a tiny model in this process:
which blocks run their forward again in backward, and how many activation bytes the forward keeps."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from training.contract.spec import ModelSpec, TrainSpec
from training.torch.model import GPT
from training.torch.parallel import CheckpointedBlock, apply_recompute

N_LAYER = 8


def step(recompute: str, every: int = 2) -> tuple[list[int], int, list[int]]:
    """One forward and backward of an 8-block model: the forward calls of each block, the bytes the autograd
    graph saved during the forward, and which blocks were wrapped for recompute."""
    spec = ModelSpec(family="gpt2", n_layer=N_LAYER, n_head=2, d_model=32, vocab_size=64, seq_len=16)
    model = GPT(spec, seed=3)
    apply_recompute(model.blocks, TrainSpec(micro_batch_size=2, steps=2, warmup_steps=0, recompute=recompute,
                                            recompute_every=every))
    wrapped = [i for i, b in enumerate(model.blocks) if isinstance(b, CheckpointedBlock)]
    calls = [0] * N_LAYER
    for i, block in enumerate(model.blocks):
        inner: nn.Module = block.block if isinstance(block, CheckpointedBlock) else block
        # a pre-hook: the recompute stops once it has what backward needs, before a post-hook would run
        inner.register_forward_pre_hook(lambda *_a, i=i: calls.__setitem__(i, calls[i] + 1))
    saved = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())
        return t

    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(idx, idx)
    forward_bytes = sum(saved)
    loss.backward()
    return calls, forward_bytes, wrapped


def test_every_kth_block_recomputes_and_the_saved_activations_fall_between_none_and_full():
    none_calls, none_bytes, none_wrapped = step("none")
    full_calls, full_bytes, full_wrapped = step("full")
    quarter_calls, quarter_bytes, quarter_wrapped = step("selective", every=4)  # the source's 1/4
    eighth_calls, eighth_bytes, eighth_wrapped = step("selective", every=8)     # the source's 1/8
    assert none_wrapped == [] and full_wrapped == list(range(N_LAYER))
    assert quarter_wrapped == [0, 4] and eighth_wrapped == [0]
    # a checkpointed block runs its forward twice (once more in backward); the others once
    assert none_calls == [1] * N_LAYER and full_calls == [2] * N_LAYER
    assert quarter_calls == [2, 1, 1, 1, 2, 1, 1, 1] and eighth_calls == [2] + [1] * 7
    # what the forward keeps for backward: fewer blocks keep their activations, fewer bytes
    assert full_bytes < quarter_bytes < eighth_bytes < none_bytes
    per_block = (none_bytes - full_bytes) / N_LAYER  # the activations one block keeps beyond its input
    assert quarter_bytes == pytest.approx(none_bytes - 2 * per_block, rel=1e-9)
    assert eighth_bytes == pytest.approx(none_bytes - per_block, rel=1e-9)

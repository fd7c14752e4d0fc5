"""The fp8 path of the mfu table's MP + FP8 rows, in this process: torchao's float8 training (the pinned
torchao 0.18.0, on the pinned torch 2.13.0) swaps the transformer's linears through
``training.torch.precision.Precision.convert`` and trains a step. On a CPU the worker refuses fp8 (no fp8
tensor cores: test_runs.py); here the conversion and torchao's scaled matmuls run eagerly on the CPU, which
torch 2.13 can, to show the versions work together. With ``train.compile`` (how the worker runs fp8) the same
step passed here too, but compiling takes ~145 s on this 2-core machine: docs/gpu-readiness.md."""
from __future__ import annotations

import pytest
import torch

from training.contract.spec import ModelSpec
from training.torch.model import GPT
from training.torch.precision import Precision

SPEC = ModelSpec(family="gpt2", n_layer=2, n_head=4, d_model=64, vocab_size=256, seq_len=32)


def loss_and_grads(precision: str) -> tuple[GPT, float, list[torch.Tensor]]:
    model = GPT(SPEC, seed=5)
    chosen = Precision(precision, torch.device("cpu"), torch.bfloat16)
    chosen.convert(model)
    idx = torch.randint(0, SPEC.vocab_size, (2, SPEC.seq_len), generator=torch.Generator().manual_seed(1))
    with chosen.autocast():
        loss = model(idx, idx)
    loss.backward()
    return model, loss.item(), [p.grad for p in model.parameters() if p.grad is not None]


def test_torchao_float8_swaps_the_block_linears_and_trains_a_step_near_bf16():
    from torchao.float8.float8_linear import Float8Linear

    model, fp8_loss, grads = loss_and_grads("fp8")
    linears = {name: type(m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert linears.pop("lm_head") is torch.nn.Linear  # the LM head stays bf16, as torchao's recipes keep it
    assert len(linears) == 2 * 6 and set(linears.values()) == {Float8Linear}  # q k v proj fc down, per block
    assert all(torch.isfinite(g).all() for g in grads) and len(grads) == len(list(model.parameters()))
    _, bf16_loss, _ = loss_and_grads("bf16")
    assert fp8_loss == pytest.approx(bf16_loss, rel=0.02)  # same weights and tokens: fp8 rounding only

"""``debug.grad_noise`` (training/torch/train.py): a deliberate, seeded relative perturbation of the gradients,
the defect a loss-curve reference must catch. In-process, on a tiny module."""
from __future__ import annotations

import pytest
import torch

from training.contract.spec import DebugSpec
from training.torch.train import perturb_gradients


def _optimizer_with_grads() -> torch.optim.Optimizer:
    layer = torch.nn.Linear(64, 64)
    for p in layer.parameters():
        p.grad = torch.ones_like(p)
    return torch.optim.AdamW(layer.parameters())


def test_gradients_are_scaled_by_one_plus_relative_noise_the_same_for_one_seed_and_step():
    a, b, c = _optimizer_with_grads(), _optimizer_with_grads(), _optimizer_with_grads()
    perturb_gradients(a, 0.1, seed=1234, step=3)
    perturb_gradients(b, 0.1, seed=1234, step=3)
    perturb_gradients(c, 0.1, seed=1234, step=4)
    grads = [torch.cat([p.grad.ravel() for p in o.param_groups[0]["params"]]) for o in (a, b, c)]
    assert torch.equal(grads[0], grads[1]) and not torch.equal(grads[0], grads[2])
    assert float((grads[0] - 1).std()) == pytest.approx(0.1, rel=0.1)  # relative: g = 1, so g - 1 = 0.1 z
    assert float((grads[0] - 1).mean()) == pytest.approx(0.0, abs=0.01)


def test_the_knob_is_off_by_default_and_bounded():
    assert DebugSpec().grad_noise == 0.0
    with pytest.raises(ValueError):
        DebugSpec(grad_noise=-0.1)


def test_paddle_refuses_the_knob_it_does_not_implement():
    from run_benchmarks.catalog import frameworks
    from training.contract.spec import WorkloadSpec

    workload = WorkloadSpec.model_validate({
        "model": {"family": "gpt2", "n_layer": 1, "n_head": 2, "d_model": 16, "vocab_size": 64, "seq_len": 16},
        "train": {"micro_batch_size": 2, "steps": 2, "warmup_steps": 1}, "debug": {"grad_noise": 0.01}})
    assert any("grad_noise" in line for line in frameworks.get("paddle").unsupported(workload, 1))
    assert not any("grad_noise" in line for line in frameworks.get("torch").unsupported(workload, 1))

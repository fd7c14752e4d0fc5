"""LoRA (Hu et al., 2021): frozen base weights plus a trainable low-rank update ``B @ A``.

B starts at zero, so step 0 computes exactly the base model; only A and B get
gradients and optimizer state, which is what makes LoRA cheap to train. The
worker's initial values (``training/torch/init.py``) come from ``training/adapters.py``,
shared with the Paddle worker's ``training/paddle/lora.py``.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from training.adapters import TARGET_PATHS
from training.contract.spec import TrainSpec


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, rank, bias=False, device=base.weight.device)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False, device=base.weight.device)
        nn.init.kaiming_uniform_(self.lora_a.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_b.weight)
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale


def apply_lora(model: nn.Module, train: TrainSpec) -> int:
    """Freeze ``model`` and put adapters on the target linears of every block; returns the adapters' size."""
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = 0
    for block in model.blocks:
        for target in train.lora_targets:
            parent_path, _, attr = TARGET_PATHS[target].rpartition(".")
            parent = block.get_submodule(parent_path)
            lora = LoRALinear(getattr(parent, attr), train.lora_rank, train.lora_alpha)
            setattr(parent, attr, lora)
            adapters += lora.lora_a.weight.numel() + lora.lora_b.weight.numel()
    return adapters


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]

"""LoRA for the Paddle worker: the adapters of ``training/torch/lora.py``, on the same linears.

Rank, alpha, targets and initial values are the torch side's
(``training/adapters.py``: A Kaiming-uniform from the parameter's own seed, B
zero, output scaled by ``lora_alpha / lora_rank``); the base model is frozen
(``stop_gradient``), so only A and B get gradients and optimizer state. Paddle
stores a linear's weight ``[in, out]``: A's value is the transpose of torch's.
Adapters go on plain ``nn.Linear`` layers only (one model-parallel rank): the
plan refuses LoRA with tensor, sequence or pipeline parallelism for Paddle.
"""
from __future__ import annotations

import paddle
from paddle import nn

from training.adapters import TARGET_PATHS, lora_a_initial
from training.contract.spec import TrainSpec

_ZERO = paddle.ParamAttr(initializer=nn.initializer.Constant(0.0))


class LoRALinear(nn.Layer):
    def __init__(self, base: nn.Linear, rank: int, alpha: float, a_value):
        super().__init__()
        n_in, n_out = base.weight.shape
        self.base = base
        self.lora_a = nn.Linear(n_in, rank, bias_attr=False)
        self.lora_b = nn.Linear(rank, n_out, weight_attr=_ZERO, bias_attr=False)
        self.lora_a.weight.set_value(a_value.T.copy())
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale


def apply_lora(model: nn.Layer, train: TrainSpec) -> int:
    """Freeze ``model`` and put adapters on the target linears of every block; returns the adapters' size."""
    for param in model.parameters():
        param.stop_gradient = True
    adapters = 0
    for number, block in enumerate(model.blocks):
        for target in train.lora_targets:
            path = TARGET_PATHS[target]
            parent_path, _, attr = path.rpartition(".")
            parent = getattr(block, parent_path)
            base = getattr(parent, attr)
            if type(base) is not nn.Linear:
                raise ValueError(f"LoRA in Paddle adapts plain linears; blocks.{number}.{path} is "
                                 f"{type(base).__name__} (tensor or sequence parallel)")
            a_value = lora_a_initial(train.seed, f"blocks.{number}.{path}.lora_a.weight", train.lora_rank,
                                     base.weight.shape[0])
            lora = LoRALinear(base, train.lora_rank, train.lora_alpha, a_value)
            setattr(parent, attr, lora)
            adapters += lora.lora_a.weight.size + lora.lora_b.weight.size
    return adapters


def trainable_parameters(model: nn.Layer) -> list:
    return [p for p in model.parameters() if not p.stop_gradient]

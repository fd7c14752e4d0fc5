"""LoRA's framework-neutral half: which linears get adapters, and the adapters' initial values.

Both workers (``training/torch/lora.py``, ``training/paddle/lora.py``) put
the same adapters on the same linears (``train.lora_targets``: PEFT's and
PaddleNLP's default is rank 8 on q and v), scaled by ``lora_alpha / lora_rank``,
and start them from the same values: A Kaiming-uniform as ``nn.Linear``
initialises it (``a = sqrt(5)``: uniform within +-1/sqrt(fan_in)), drawn here
with NumPy from the parameter's own seed ``(train.seed, its name)``, and B zero,
so step 0 computes the base model exactly. That is what lets a torch LoRA run
and a Paddle one from the same base weights (``train.init_weights``) agree loss
for loss. NumPy only: a Paddle image has no torch.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

# ``lora_targets`` names -> the linear's path inside a block (the same in both models).
TARGET_PATHS = {"q": "attn.q", "k": "attn.k", "v": "attn.v", "o": "attn.proj",
                "fc": "mlp.fc", "gate": "mlp.gate", "down": "mlp.proj"}


def parameter_seed(seed: int, name: str) -> int:
    """The seed of one parameter's initial value: the run's seed and the parameter's name."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") >> 1


def lora_a_initial(seed: int, name: str, rank: int, in_features: int) -> np.ndarray:
    """A's initial value, float32 ``[rank, in_features]`` (torch's ``[out, in]``), for parameter ``name``
    (``blocks.0.attn.q.lora_a.weight``): Kaiming-uniform with a = sqrt(5), bound 1 / sqrt(in_features)."""
    bound = 1.0 / math.sqrt(in_features)
    rng = np.random.default_rng(parameter_seed(seed, name))
    return rng.uniform(-bound, bound, size=(rank, in_features)).astype(np.float32)

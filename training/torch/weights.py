"""Initial weights as a framework-neutral file, so PyTorch and Paddle can start from the same model.

The file is an uncompressed ``.npz``: one float32 array per parameter, named as
in ``training/torch/model.py`` (``wte.weight``, ``blocks.0.attn.q.weight`` ...),
linear weights in torch's ``[out, in]`` layout; a tied ``lm_head.weight`` is
not stored. ``train.init_weights`` points a case at such a file; torch reads it
one array at a time into each rank's shards (``training/torch/init.py``),
Paddle's loader (``training/paddle/weights.py``) transposes and slices it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import nn

from training.contract.spec import ModelSpec


def save(model: nn.Module, path: str | Path) -> Path:
    arrays = {}
    seen: set[int] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:  # tied lm_head
            continue
        seen.add(id(param))
        arrays[name] = param.detach().float().cpu().numpy()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def write_initial_weights(spec: ModelSpec, seed: int, path: str | Path) -> Path:
    """The weights ``training/torch/train.py`` starts from with this seed, as a file."""
    from training.torch.model import GPT

    return save(GPT(spec, seed=seed), path)

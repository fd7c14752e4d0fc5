"""Initial weights as a framework-neutral file, so PyTorch and Paddle can start from the same model.

The file is an uncompressed ``.npz``: one float32 array per parameter, named as
in ``training/torch/model.py`` (``wte.weight``, ``blocks.0.attn.q.weight`` ...),
linear weights in torch's ``[out, in]`` layout; a tied ``lm_head.weight`` is
not stored. ``train.init_weights`` points a case at such a file; Paddle's
loader (``training/paddle/weights.py``) transposes and slices it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from training.spec import ModelSpec


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


def load(model: nn.Module, path: str | Path) -> None:
    """Copy every parameter from the file; a missing, extra or misshapen array is an error naming it."""
    with np.load(path) as arrays:
        stored = set(arrays.files)
        params = dict(model.named_parameters())
        missing = sorted(set(params) - stored - ({"lm_head.weight"} if "wte.weight" in stored else set()))
        extra = sorted(stored - set(params))
        if missing or extra:
            raise ValueError(f"{path}: does not fit the model: missing {missing[:5]}, unexpected {extra[:5]}")
        with torch.no_grad():
            for name in stored:
                param = params[name]
                if tuple(arrays[name].shape) != tuple(param.shape):
                    raise ValueError(f"{path}: {name} has shape {arrays[name].shape}, the model {tuple(param.shape)}")
                param.copy_(torch.from_numpy(arrays[name]))


def write_initial_weights(spec: ModelSpec, seed: int, path: str | Path) -> Path:
    """The weights ``training/torch/train.py`` starts from with this seed, as a file."""
    from training.torch.model import GPT

    torch.manual_seed(seed)
    return save(GPT(spec), path)

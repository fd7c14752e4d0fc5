"""Load ``train.init_weights`` (the ``.npz`` of ``training/torch/weights.py``) into the Paddle model.

The file uses torch's names and ``[out, in]`` linear weights. Here each
parameter's name is mapped to that vocabulary (dropping the ``embedding.`` /
``head.`` parts; pipeline stages name theirs in ``pipeline.py``), linear weights are transposed to Paddle's
``[in, out]``, and tensor-parallel parameters (fleet marks them
``is_distributed`` with a ``split_axis``) get this rank's contiguous slice,
which is how fleet splits them: whole heads, whole MLP columns.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import paddle

_EMBEDDINGS = ("wte.weight", "wpe.weight")
_PARTS = re.compile(r"^(?:embedding\.|head\.)")


def canonical_name(name: str) -> str:
    """``GPT`` parameter name -> the file's name (the pipeline names its stages' parameters itself)."""
    return _PARTS.sub("", name)


def _is_linear_weight(canonical: str, param: paddle.Tensor) -> bool:
    return param.ndim == 2 and canonical.endswith(".weight") and canonical not in _EMBEDDINGS


def load(named_params, path: str | Path, mp_rank: int = 0, mp_degree: int = 1) -> int:
    """Copy the file into ``named_params`` ((canonical name, parameter) pairs); returns how many were set."""
    done = 0
    with np.load(path) as arrays:
        for name, param in named_params:
            if name == "lm_head.weight" and name not in arrays.files:
                continue  # tied to wte
            if name not in arrays.files:
                raise ValueError(f"{path}: no array {name!r} for the Paddle model (it has {len(arrays.files)}: "
                                 f"{', '.join(arrays.files[:4])} ...); was it written for this model.yaml?")
            value = arrays[name]
            if _is_linear_weight(name, param):
                value = value.T
            if getattr(param, "is_distributed", False) and mp_degree > 1:
                axis = param.split_axis
                value = np.split(value, mp_degree, axis=axis)[mp_rank]
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(f"{path}: {name} has shape {value.shape} here, the Paddle parameter {param.shape}")
            param.set_value(np.ascontiguousarray(value).astype(np.float32).astype(param.numpy().dtype))
            done += 1
    return done

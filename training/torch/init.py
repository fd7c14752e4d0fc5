"""Initial weights that do not depend on the layout, filled in after the model is split.

The worker builds the model on the meta device (no memory), wraps it (LoRA,
tensor parallel, FSDP, pipeline stages), and only then materialises what this
rank holds (``materialize``): ``to_empty`` on the device, then every parameter
from its own seed, ``(train.seed, its name in the unwrapped model)``, or from
``train.init_weights``. Each value is built on the CPU one parameter at a time
and only this rank's shard of it is kept, so no rank ever holds more than its
share of the model plus one full parameter, and every layout starts from
exactly the weights one process would (tests/test_parity.py checks it).

Modules are named (``name_modules``) before any wrapping: FSDP, tensor
parallelism and pipeline stages keep the module objects but not their paths.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from torch import nn

from training.adapters import lora_a_initial, parameter_seed

NAME = "_accelbench_name"  # a module's path in the unwrapped model
STD = 0.02


def name_modules(model: nn.Module) -> None:
    """Remember each module's path, LoRA's ``.base`` left out, so the base weights keep their names."""
    for path, module in model.named_modules():
        setattr(module, NAME, path.replace(".base", ""))


def name_as(module: nn.Module, path: str) -> None:
    """``module`` starts from the values of ``path`` (the pipeline's copy of a tied embedding)."""
    setattr(module, NAME, path)


def initial_value(module: nn.Module, name: str, shape: torch.Size, n_layer: int, seed: int) -> torch.Tensor:
    """The full fp32 value of one parameter on the CPU (GPT-2's init: N(0, 0.02), residual projections
    scaled by depth, norms at one, biases at zero; LoRA's A Kaiming-uniform, B zero)."""
    # device="cpu" explicitly: a caller's ``with torch.device(...)`` (PPO builds its roles under the device)
    # would otherwise put the value there while the seeded generator stays on the CPU (seen on an H100).
    module_name, _, kind = name.rpartition(".")
    if module_name.endswith("lora_a"):
        return torch.from_numpy(lora_a_initial(seed, name, *shape))
    value = torch.empty(shape, dtype=torch.float32, device="cpu")
    generator = torch.Generator(device="cpu").manual_seed(parameter_seed(seed, name))
    if kind == "bias" or module_name.endswith("lora_b"):
        return value.zero_()
    if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
        return value.fill_(1.0)
    std = STD / math.sqrt(2 * n_layer) if module_name.endswith("proj") else STD  # GPT-2: O(1) activations at init
    return value.normal_(0.0, std, generator=generator)


class WeightsFile:
    """A ``train.init_weights`` file, checked against the model's names and shapes, read one array at a time."""

    def __init__(self, path: str, expected: dict[str, torch.Size]):
        self.path = path
        self.arrays = np.load(path)
        stored = set(self.arrays.files)
        missing = sorted(set(expected) - stored - ({"lm_head.weight"} if "wte.weight" in stored else set()))
        extra = sorted(stored - set(expected))
        if missing or extra:
            raise ValueError(f"{path}: does not fit the model: missing {missing[:5]}, unexpected {extra[:5]}")
        for name in stored:
            shape = self._shape(name)
            if shape != tuple(expected[name]):
                raise ValueError(f"{path}: {name} has shape {shape}, the model {tuple(expected[name])}")

    def _shape(self, name: str) -> tuple[int, ...]:
        """The array's shape from its header, without reading its data."""
        with self.arrays.zip.open(f"{name}.npy") as f:
            fmt = np.lib.format
            read = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else fmt.read_array_header_2_0
            return tuple(read(f)[0])

    def close(self) -> None:
        self.arrays.close()

    def get(self, name: str) -> Optional[torch.Tensor]:
        if name not in self.arrays.files:
            return None
        return torch.from_numpy(self.arrays[name])


def _shard_of(full: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``full``: the local shard of a DTensor parameter, else all of it."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not isinstance(param, DTensor):
        return full
    # src_data_rank=None: every rank slices its own copy, no communication.
    return distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None).to_local()


@torch.no_grad()
def fill(module: nn.Module, seed: int, n_layer: int, weights: Optional[WeightsFile] = None) -> None:
    """Give every parameter under ``module`` its initial value (each shared one once)."""
    from torch.distributed.tensor import DTensor

    seen: set[int] = set()
    for path, sub in module.named_modules():
        prefix = getattr(sub, NAME, path)
        for pname, param in sub.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            name = f"{prefix}.{pname}" if prefix else pname
            full = weights.get(name) if weights is not None else None
            if full is None:
                full = initial_value(sub, name, param.shape, n_layer, seed)
            local = param.to_local() if isinstance(param, DTensor) else param
            local.copy_(_shard_of(full, param))


def materialize(module: nn.Module, device: torch.device, seed: int, n_layer: int,
                weights: Optional[WeightsFile] = None, buffer_device: Optional[torch.device] = None) -> None:
    """Allocate what this rank holds of ``module`` (a meta module, already wrapped) on ``device`` and
    initialise it; buffers (position tables) go to ``buffer_device``, the compute device under offload."""
    uses = [(sub, pname, id(param)) for sub in module.modules() for pname, param in sub._parameters.items()
            if param is not None]
    module.to_empty(device=device)
    _tie_again(uses)
    fill(module, seed, n_layer, weights)
    for sub in module.modules():
        if hasattr(sub, "reset_position_buffers"):
            sub.reset_position_buffers(buffer_device or device)


def _tie_again(uses: list[tuple[nn.Module, str, int]]) -> None:
    """``to_empty`` gives each module its own new parameter, which unties shared ones (GPT-2's embedding and
    LM head): make every use of a parameter that was shared the same one again."""
    first: dict[int, nn.Parameter] = {}
    for sub, pname, old in uses:
        param = first.setdefault(old, sub._parameters[pname])
        if sub._parameters[pname] is not param:
            sub._parameters[pname] = param

"""Numeric precision of a training run: autocast, loss scaling and fp8 conversion.

  fp32  no autocast
  bf16  autocast to bfloat16 (weights and optimizer state stay fp32)
  fp16  autocast to float16 with dynamic loss scaling; under sharded gradients
        (FSDP, tensor parallel) the scaler agrees on overflow across ranks, so
        every rank skips the same steps
  fp8   torchao float8 training for the transformer's linears, bf16 autocast
        elsewhere; needs an accelerator of compute capability 8.9+ (Ada, Hopper) and torchao
"""
from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass
from typing import ContextManager, Optional

import torch
from torch import nn

from training.unsupported import UnsupportedOnDevice

__all__ = ["Precision", "UnsupportedOnDevice", "fsdp_mixed_precision", "resolve"]

FP8_MIN_CAPABILITY = (8, 9)


@dataclass(frozen=True)
class Precision:
    name: str
    device: torch.device
    autocast_dtype: Optional[torch.dtype]

    def autocast(self) -> ContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def convert(self, model: nn.Module) -> None:
        """Swap the linears for fp8 ones (fp8 only); before any parallel wrapping, as torchao requires."""
        if self.name != "fp8":
            return
        from torchao.float8 import convert_to_float8_training

        def fp8_friendly(module: nn.Module, fqn: str) -> bool:
            # The LM head stays bf16 (as in torchao's recipes); fp8 GEMMs need dimensions divisible by 16.
            return (isinstance(module, nn.Linear) and not fqn.endswith("lm_head")
                    and module.in_features % 16 == 0 and module.out_features % 16 == 0)

        convert_to_float8_training(model, module_filter_fn=fp8_friendly)

    def grad_scaler(self, shards_gradients: bool):
        enabled = self.name == "fp16"
        if enabled and shards_gradients:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            return ShardedGradScaler(self.device.type)
        return torch.amp.GradScaler(self.device.type, enabled=enabled)


def fsdp_mixed_precision(name: str):
    """bf16/fp16: FSDP2 gathers parameters and computes in the low precision (half the all-gather bytes)
    and reduce-scatters gradients in fp32 (summing many ranks' gradients in 16 bits loses precision);
    fp32 and fp8 (torchao casts its own linears): FSDP2's default, all in the parameters' fp32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(name)
    return MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32 if low else None)


def resolve(name: str, device: torch.device) -> Precision:
    if name == "fp8":
        _require_fp8(device)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}[name]
    return Precision(name, device, dtype)


def _require_fp8(device: torch.device) -> None:
    needs = f"fp8 training needs an accelerator of compute capability {'.'.join(map(str, FP8_MIN_CAPABILITY))}+"
    if device.type == "cpu":
        raise UnsupportedOnDevice(f"{needs}; this run is on cpu")
    module = torch.get_device_module(device.type)
    read_capability = getattr(module, "get_device_capability", None)
    capability = read_capability(device) if read_capability is not None else None
    if not isinstance(capability, tuple):  # a device that does not speak in compute capabilities
        raise UnsupportedOnDevice(f"{needs}; {device.type} reports no compute capability")
    if capability < FP8_MIN_CAPABILITY:
        name = module.get_device_name(device) if hasattr(module, "get_device_name") else device.type
        raise UnsupportedOnDevice(f"{needs}; {name} has {capability[0]}.{capability[1]}")
    if importlib.util.find_spec("torchao") is None:
        raise UnsupportedOnDevice("fp8 training uses torchao's float8, which is not installed on this host "
                                  "(pip install torchao==0.18.0, the version tested with torch 2.13.0: accelbench's fp8 extra)")

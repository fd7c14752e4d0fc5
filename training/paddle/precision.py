"""The number formats of a Paddle run: AMP for fp16/bf16, and the math fp32 matmuls use.

MFU divides by the vendor's peak for the run's dtype. On NVIDIA GPUs Paddle runs
fp32 matmuls (cuBLAS) and convolutions (cuDNN) in TF32 by default, so an fp32 run
would be measured against the fp32 peak while doing TF32 work: an fp32 run turns
TF32 off, and every run reports which math its fp32 matmuls used.
"""
from __future__ import annotations

import contextlib

import paddle

from training.contract.spec import WorkloadSpec

TF32_FLAGS = ("FLAGS_allow_tf32_cublas", "FLAGS_allow_tf32_cudnn")  # defined by CUDA builds only


def flags_in_build(names) -> list[str]:
    present = []
    for name in names:
        try:
            paddle.get_flags([name])
        except ValueError:  # "cannot get its value": this build does not define it (CPU, XPU, custom device)
            continue
        present.append(name)
    return present


def set_fp32_matmul(precision: str, on_cpu: bool) -> str:
    """Turn TF32 off for an fp32 run where the build has the flags; returns the fp32 matmul math for the
    environment facts: ``ieee``, ``tf32``, or ``device default`` (a build that offers no switch)."""
    flags = flags_in_build(TF32_FLAGS)
    if precision == "fp32" and flags:
        paddle.set_flags({name: False for name in flags})
    if on_cpu:
        return "ieee"
    if TF32_FLAGS[0] in flags:
        return "tf32" if paddle.get_flags([TF32_FLAGS[0]])[TF32_FLAGS[0]] else "ieee"
    return "device default"


class Precision:
    """AMP for fp16/bf16 on an accelerator: O1 autocast or O2 low-precision weights, fp16 with loss scaling.

    ``scaler`` is a plain ``GradScaler`` here; ``hybrid.wrap`` replaces it with the one fleet's wrappers
    need (``fleet.distributed_scaler``, or group sharding's ``GroupShardedScaler``).
    """

    def __init__(self, spec: WorkloadSpec):
        self.name = spec.train.precision
        self.level = spec.train.amp_level
        self.dtype = {"fp16": "float16", "bf16": "bfloat16"}.get(self.name)
        self.scaler = None

    def decorate(self, model, optimizer):
        if self.dtype is None:
            return model, optimizer
        if self.level == "O2":
            model, optimizer = paddle.amp.decorate(models=model, optimizers=optimizer, level="O2",
                                                   dtype=self.dtype, master_weight=True)
        if self.name == "fp16":
            self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**15)
        return model, optimizer

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(level=self.level, dtype=self.dtype)

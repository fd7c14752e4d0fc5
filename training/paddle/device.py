"""This rank's Paddle device, whatever the accelerator: gpu (CUDA and ROCm builds), xpu, or a custom device.

The kind names the ``paddle.set_device`` name (``DeviceSpec.paddle_device``);
the launcher's ``FLAGS_selected_*`` pick this rank's index. A Paddle build that
lacks the device makes the case ``unsupported`` on it, not ``failed``.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

import paddle

from training.harness import DeviceMemory
from training.contract.spec import DeviceSpec
from training.unsupported import UnsupportedOnDevice


def open_device(spec: DeviceSpec) -> str:
    """Set the device for everything after; Paddle's name for it (``cpu``, ``gpu:0``, ``npu:1``, ...)."""
    name = spec.paddle_device
    if name != "cpu" and not _built_with(name):
        raise UnsupportedOnDevice(f"this Paddle build ({paddle.__version__}) has no {name} device "
                                  f"(accelerator kind {spec.kind}); install Paddle's build for it")
    paddle.set_device(name)
    return paddle.get_device()


def _built_with(name: str) -> bool:
    if name == "gpu":
        return paddle.device.is_compiled_with_cuda() or paddle.device.is_compiled_with_rocm()
    if name == "xpu":
        return paddle.device.is_compiled_with_xpu()
    return name in paddle.device.get_all_custom_device_type()


def synchronize() -> None:
    paddle.device.synchronize()


def memory(spec: DeviceSpec) -> DeviceMemory:
    total = None
    if spec.paddle_device == "gpu":  # only the gpu module says how much the device has
        total = paddle.device.cuda.get_device_properties(paddle.device.get_device()).total_memory
    return DeviceMemory(peak_allocated=paddle.device.max_memory_allocated(),
                        peak_reserved=paddle.device.max_memory_reserved(), total=total)


def reset_peak_memory() -> None:
    paddle.device.reset_max_memory_allocated()
    paddle.device.reset_max_memory_reserved()


def environment(spec: DeviceSpec) -> dict:
    env = {"paddle": paddle.__version__, "paddle_commit": paddle.version.commit,
           "paddle_cuda": paddle.version.cuda() if paddle.device.is_compiled_with_cuda() else None,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    if spec.paddle_device != "cpu":
        env["accelerator"] = _fact(paddle.device.get_device_name)
        env["accelerator_count"] = _fact(paddle.device.device_count)
        env["nccl"] = _fact(paddle.version.nccl) if paddle.device.is_compiled_with_cuda() else None  # comm library
    return env


def _fact(read: Callable[[], object]) -> Optional[object]:
    """A fact a device's build may not offer: None rather than a failed run."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - informational only
        return None

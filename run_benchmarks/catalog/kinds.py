"""Accelerator kinds: everything that differs between a CPU, an NVIDIA GPU, an AMD GPU, an Ascend NPU, ...

A kind says how the frameworks address the device (torch device type and the module that adds it,
Paddle device), which variable picks the devices a process sees, how a host counts its devices,
the collective backend per framework, the monitor, and environment probes. cpu, nvidia and rocm
ship here (as plain data in shipped_kinds.py, registered by path and validated against ``KindSpec``); a
vendor declares any other kind in its ``vendor.yaml`` under ``kinds:`` (same schema),
with optional worker hooks in a file of its own folder: no edit to ``run_benchmarks/`` or
``training/``. The worker's part of a kind crosses in the worker config as ``DeviceSpec``.
"""
from __future__ import annotations

import re
from typing import Optional, Union

from pydantic import Field, field_validator

from training.contract.spec import CommandMonitorSpec, DeviceSpec, MonitorName

from run_benchmarks.catalog.config import Strict
from run_benchmarks.registry import Registry

class DeviceCountSpec(Strict):
    """A command that lists a host's devices, and how to count them in its output."""

    command: tuple[str, ...] = Field(min_length=1, description="argv run on the host, e.g. [nvidia-smi, -L]")
    pattern: str = Field(".+", description=(
        "a regular expression over the output's lines: with a group named count, its number; with another "
        "group, the distinct values it captures (a device listed over several lines counts once); without "
        "groups, the matching lines"))

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return pattern

    def unmatched(self, output: str, lines: int = 5) -> Optional[str]:
        """Why a count of 0 is the pattern's and not the host's: the tool printed lines and the pattern matched
        none of them (a tool whose format changed, a pattern written for another tool). None otherwise."""
        printed = [line for line in output.splitlines() if line.strip()]
        regex = re.compile(self.pattern)
        if not printed or any(regex.search(line) for line in printed):
            return None
        first = " | ".join(line.strip()[:120] for line in printed[:lines])
        return (f"device_count pattern {self.pattern!r} matched none of the {len(printed)} line(s) "
                f"`{' '.join(self.command)}` printed; its first lines: {first}")

    def count(self, output: str) -> int:
        regex = re.compile(self.pattern)
        matches = [m for m in map(regex.search, output.splitlines()) if m]
        if "count" in regex.groupindex:
            return sum(int(m.group("count")) for m in matches)
        if regex.groups:
            return len({m.group(1) for m in matches})
        return len(matches)


class KindSpec(Strict):
    description: str = ""
    torch_device: str = Field(description="torch device type: cpu, cuda (CUDA and ROCm builds), xpu, npu, mlu, musa, hpu")
    torch_module: Optional[str] = Field(None, description="module that adds the device to torch (torch_npu, "
                                                          "torch_mlu, torch_musa); imported by the worker first")
    paddle_device: str = Field("cpu", description="paddle.set_device name: cpu, gpu (CUDA and ROCm), xpu, or a "
                                                  "custom device (npu, mlu, ...)")
    visible_devices_env: Optional[str] = Field(None, description="CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, "
                                                                 "ASCEND_RT_VISIBLE_DEVICES, ...")
    device_count: tuple[DeviceCountSpec, ...] = Field((), description=(
        "commands that count a host's devices, tried in order until one runs; none: devices are not counted"))
    backends: dict[str, str] = Field(default_factory=dict, description="framework -> collective backend "
                                                                       "(nccl, hccl, cncl, xccl, gloo, ...)")
    monitor: Union[MonitorName, CommandMonitorSpec] = Field("none", description=(
        "nvml, rocm-smi, cpu, none, or a command with a parser (npu-smi, cnmon, xpu-smi, ...)"))
    probes: dict[str, str] = Field(default_factory=dict, description="environment field -> command, per host")
    kubernetes_resource: Optional[str] = Field(None, pattern=r"^[a-z0-9.\-]+/[A-Za-z0-9_.\-]+$", description=(
        "the device plugin's resource a pod asks for, one per process (nvidia.com/gpu, amd.com/gpu, "
        "huawei.com/Ascend910); none: the pods ask for no device"))
    worker_plugin: Optional[str] = Field(None, description=(
        "a Python file in the vendor's folder (plugin.py, or '{vendor_dir}/plugin.py') with worker hooks: "
        "setup(device) before the device is used, environment() -> dict recorded with the results"))

    def device_spec(self, name: str, framework: str, plugin_path: Optional[str] = None) -> DeviceSpec:
        return DeviceSpec(kind=name, torch_device=self.torch_device, torch_module=self.torch_module,
                          paddle_device=self.paddle_device, backend=self.backends.get(framework),
                          visible_devices_env=self.visible_devices_env, worker_plugin=plugin_path,
                          monitor=self.monitor)

    @property
    def counted(self) -> bool:
        return bool(self.device_count)


KINDS: Registry[KindSpec] = Registry("accelerator kind", make=KindSpec.model_validate)
KINDS.register("cpu", "run_benchmarks.catalog.shipped_kinds:CPU")
KINDS.register("nvidia", "run_benchmarks.catalog.shipped_kinds:NVIDIA")
KINDS.register("rocm", "run_benchmarks.catalog.shipped_kinds:ROCM")

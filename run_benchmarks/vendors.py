"""The vendor registry: every ``vendors/<vendor>/vendor.yaml``, and the hardware each declares.

The ``hardware`` field of a case name picks an accelerator; the registry says
which vendor owns it, how the framework reaches it (device type), and its peak
dense TFLOP/s per dtype, which MFU is measured against.
"""
from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import ConfigDict, Field, PositiveFloat, field_validator

from .config import Strict, load_model
from .errors import UserError

Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
# The peak a precision setting is measured against: fp32 training runs fp32 matmuls.
PEAK_KEY_FOR_PRECISION = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8")
MONITORS = ("nvml", "rocm-smi", "cpu", "none")


class AcceleratorSpec(Strict):
    device: Literal["cpu", "cuda"] = Field(description="how the frameworks address it (ROCm builds use cuda)")
    memory_gib: Optional[PositiveFloat] = None
    peak_tflops: dict[Dtype, PositiveFloat] = Field(default_factory=dict,
                                                    description="dense peak per dtype, no sparsity")
    unsupported_dtypes: list[Dtype] = Field(default_factory=list, description="dtypes the part has no units for "
                                                                             "(A100: fp8), so no peak is missing")
    peak_note: str = Field("", description="why peaks are not declared at all (e.g. a CPU whose peak depends "
                                           "on the model); MFU is then n/a with this reason")
    interconnect: str = ""

    def missing_peaks(self) -> list[str]:
        if self.peak_note:
            return []
        return [d for d in DTYPES if d not in self.peak_tflops and d not in self.unsupported_dtypes]


class ContainerOptions(Strict):
    """How a node's container is started (Docker SDK ``containers.run`` options)."""

    shm_size: Optional[str] = Field("2g", description="/dev/shm size; data loaders and NCCL need more than 64m")
    ipc_mode: Optional[str] = Field(None, description="e.g. host")
    devices: list[str] = Field(default_factory=list, description="host devices to pass, e.g. /dev/infiniband")
    gpus: bool = Field(False, description="request every GPU of the host (NVIDIA container runtime)")
    ulimits: dict[str, int] = Field(default_factory=dict, description="soft = hard limit per name, -1 for "
                                                                      "unlimited, e.g. {memlock: -1, stack: 67108864}")
    cap_add: list[str] = Field(default_factory=list, description="capabilities to grant on top of none, e.g. "
                                                                 "IPC_LOCK for RDMA, SYS_PTRACE for profilers")
    privileged: bool = Field(False, description="--privileged: every device and capability; only when a "
                                                "vendor's runtime cannot work otherwise, and said here explicitly")
    build_args: dict[str, str] = Field(default_factory=dict, description="--build-arg values for the Dockerfile")


class FrameworkRuntime(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)
    env: dict[str, str] = Field(default_factory=dict, description="variables set for every worker")
    image: Optional[str] = Field(None, description="a prebuilt image to use instead of building "
                                                   "docker/<framework>_<version>/Dockerfile")
    container: ContainerOptions = ContainerOptions()


# Environment probes every vendor gets unless it names the field itself: facts about a host that change a
# result and that the workers inside a container cannot see.
DEFAULT_PROBES = {
    "host_kernel": "uname -r",
    "cpu_governor": "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
}


class VendorSpec(Strict):
    description: str = ""
    visible_devices_env: Optional[str] = None
    accelerators: dict[str, AcceleratorSpec] = Field(min_length=1)
    frameworks: dict[str, FrameworkRuntime] = Field(default_factory=dict)
    monitor: Literal["nvml", "rocm-smi", "cpu", "none"] = Field(
        "cpu", description="accelerator monitor sampled beside every node (training/monitor.py)")
    probes: dict[str, str] = Field(default_factory=dict, description=(
        "environment field -> command run once per host before the run (split like a shell would, "
        "never run by one); its trimmed output is recorded with every result"))

    @field_validator("probes")
    @classmethod
    def _commands_split(cls, probes: dict[str, str]) -> dict[str, str]:
        for field, command in probes.items():
            try:
                if not shlex.split(command):
                    raise ValueError("empty command")
            except ValueError as exc:
                raise ValueError(f"probes.{field}: {exc}: write one command with its arguments, e.g. "
                                 "'nvidia-smi --query-gpu=name --format=csv,noheader'") from None
        return probes

    def all_probes(self) -> dict[str, str]:
        return {**DEFAULT_PROBES, **self.probes}


@dataclass(frozen=True)
class Hardware:
    name: str
    vendor: str
    vendor_dir: Path
    vendor_spec: VendorSpec
    spec: AcceleratorSpec

    def peak_tflops(self, precision: str) -> tuple[Optional[float], str]:
        """The peak for ``precision`` and, when there is none, why not."""
        key = PEAK_KEY_FOR_PRECISION.get(precision, precision)
        peak = self.spec.peak_tflops.get(key)
        if peak is None:
            return None, (f"no {key} peak for {self.name}: set accelerators.{self.name}.peak_tflops.{key} "
                          f"in {self.vendor_dir / 'vendor.yaml'}")
        return peak, ""


class VendorRegistry:
    """Loads every vendor folder that has a ``vendor.yaml`` (``template`` excepted)."""

    def __init__(self, vendors_dir: Path):
        self.vendors_dir = vendors_dir
        self.vendors: dict[str, VendorSpec] = {}
        self.hardware: dict[str, Hardware] = {}
        for path in sorted(vendors_dir.glob("*/vendor.yaml")):
            name = path.parent.name
            if name == "template":
                continue
            spec = load_model(VendorSpec, path)
            self.vendors[name] = spec
            for hw_name, accel in spec.accelerators.items():
                if hw_name in self.hardware:
                    other = self.hardware[hw_name].vendor_dir / "vendor.yaml"
                    raise UserError(f"{path}: accelerators.{hw_name} is also declared in {other}",
                                    "hardware names must be unique across vendors; rename one")
                self.hardware[hw_name] = Hardware(hw_name, name, path.parent, spec, accel)

    def find_hardware(self, name: str) -> Hardware:
        if name in self.hardware:
            return self.hardware[name]
        by_case = {k.lower(): k for k in self.hardware}
        close = difflib.get_close_matches(name, list(self.hardware), n=1) or (
            [by_case[name.lower()]] if name.lower() in by_case else [])
        hint = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(sorted(self.hardware)) or "(none)"
        raise UserError(f"unknown hardware {name!r}: no vendor under {self.vendors_dir} declares it",
                        f"{hint}known hardware: {known}; or add it to a vendor.yaml")

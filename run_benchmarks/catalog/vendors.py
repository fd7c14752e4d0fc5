"""The vendor registry: every ``vendors/<vendor>/vendor.yaml``, and the hardware each declares.

The ``hardware`` field of a case name picks an accelerator; the registry says
which vendor owns it, how the framework reaches it (device type), and its peak
dense TFLOP/s per dtype, which MFU is measured against.
"""
from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, conint, constr, field_validator, model_validator

from training.contract.names import GEMM_DTYPES
from training.contract.spec import CommandMonitorSpec, DeviceSpec, MonitorName

from run_benchmarks.catalog import measured_peaks
from run_benchmarks.catalog.config import Strict, load_model
from run_benchmarks.errors import UserError
from run_benchmarks.catalog.kinds import KINDS, KindSpec
from run_benchmarks.catalog.vendor_folders import VENDOR_FILE, vendor_folders
from run_benchmarks.registry import Registry

Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
VENDOR_DIR = "{vendor_dir}"
# The peak a precision setting is measured against: fp32 training runs fp32 matmuls.
PEAK_KEY_FOR_PRECISION = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


DTYPES: tuple[str, ...] = GEMM_DTYPES
# What a peak means for the runs measured against it (printed with every MFU).
PEAK_BASIS = {
    "fp32": "fp32 matmuls in IEEE fp32: TF32 off (torch's default; the Paddle worker turns it off)",
    "fp8": "only the transformer's linears run in fp8 (torchao float8 under torch.compile); attention and the "
           "LM head run in bf16, so MFU against the fp8 peak understates the fp8 units' own use",
}


def _refuse_moved(data, moved: dict[str, str]):
    """Keys of an older vendor.yaml: an error that says where the setting went, not just 'extra key'."""
    for key, message in moved.items():
        if isinstance(data, dict) and key in data:
            raise ValueError(message)
    return data


class AcceleratorSpec(Strict):
    kind: str = Field(description="the accelerator kind: cpu, nvidia, rocm, or one declared under kinds:")
    memory_gib: Optional[PositiveFloat] = Field(None, description="device memory: the total reports show "
                                                                  "memory against")
    peak_tflops: dict[Dtype, PositiveFloat] = Field(default_factory=dict,
                                                    description="dense peak per dtype, no sparsity")
    unsupported_dtypes: list[Dtype] = Field(default_factory=list, description="dtypes the part has no units for "
                                                                             "(A100: fp8), so no peak is missing")
    peak_note: str = Field("", description="why peaks are not declared at all (e.g. a CPU whose peak depends "
                                           "on the model); MFU is then n/a with this reason")
    interconnect: str = ""
    dies_per_device: Optional[PositiveInt] = Field(None, description=(
        "what one device (one rank's, what per-device figures divide by) is: the dies it drives; required for "
        "every accelerator but the CPU (catalog/fairness.py). Peaks and memory are declared per device"))
    devices_per_card: PositiveInt = Field(1, description="devices one card shows as (an MI250X's two GCDs: 2)")
    config_names: list[str] = Field(default_factory=list, description=(
        "other spellings of this accelerator at the end of extern config names (FlagPerf's A10080G)"))

    _moved = model_validator(mode="before")(lambda data: _refuse_moved(data, {
        "device": "'device' is now 'kind': name the accelerator kind (cpu, nvidia, rocm, or one declared under "
                  "kinds: in this file; see docs/vendor-onboarding.md)"}))

    def missing_peaks(self) -> list[str]:
        if self.peak_note:
            return []
        return [d for d in DTYPES if d not in self.peak_tflops and d not in self.unsupported_dtypes]


class ContainerOptions(Strict):
    """How a node's container is started (Docker SDK ``containers.run`` options)."""

    shm_size: Optional[str] = Field("2g", description="/dev/shm size; data loaders and NCCL need more than 64m")
    ipc_mode: Optional[str] = Field(None, description="e.g. host")
    devices: list[str] = Field(default_factory=list, description="host devices to pass, e.g. /dev/kfd")
    devices_if_present: list[str] = Field(default_factory=list, description=(
        "host devices passed where the host has them, e.g. /dev/infiniband on multi-node hosts"))
    gpus: bool = Field(False, description="request every GPU of the host (NVIDIA container runtime)")
    ulimits: dict[str, int] = Field(default_factory=dict, description="soft = hard limit per name, -1 for "
                                                                      "unlimited, e.g. {memlock: -1, stack: 67108864}")
    cap_add: list[str] = Field(default_factory=list, description="capabilities to grant on top of none, e.g. "
                                                                 "IPC_LOCK for RDMA, SYS_PTRACE for profilers")
    privileged: bool = Field(False, description="--privileged: every device and capability; only when a "
                                                "vendor's runtime cannot work otherwise, and said here explicitly")
    build_args: dict[str, str] = Field(default_factory=dict, description="--build-arg values for the Dockerfile")
    host_network: bool = Field(False, description="Kubernetes: pods on the node's network (hostNetwork), for "
                                                  "fabrics the pod network cannot carry; stated in the plan")
    kubernetes_resources: dict[constr(pattern=r"^[a-z0-9.\-]+/[A-Za-z0-9_.\-]+$"), conint(ge=1, le=1024)] = Field(
        default_factory=dict, description=(
        "Kubernetes: more resources per pod beside the devices, e.g. {rdma/hca_shared_devices_a: 1}"))


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
    kinds: dict[str, KindSpec] = Field(default_factory=dict, description=(
        "accelerator kinds this vendor brings (npu, mlu, ...), as run_benchmarks/catalog/kinds.py declares cpu, "
        "nvidia and rocm"))
    accelerators: dict[str, AcceleratorSpec] = Field(min_length=1)
    frameworks: dict[str, FrameworkRuntime] = Field(default_factory=dict)
    monitor: Optional[Union[MonitorName, CommandMonitorSpec]] = Field(
        None, description="accelerator monitor beside every node; default: the accelerator kind's")
    probes: dict[str, str] = Field(default_factory=dict, description=(
        "environment field -> command run once per host before the run (split like a shell would, "
        "never run by one); its trimmed output is recorded with every result; adds to the kind's probes"))

    _moved = model_validator(mode="before")(lambda data: _refuse_moved(data, {
        "visible_devices_env": "'visible_devices_env' belongs to the accelerator kind now: move it under "
                               "kinds.<kind> (or drop it: the nvidia and rocm kinds declare theirs)"}))

    @field_validator("probes")
    @classmethod
    def _commands_split(cls, probes: dict[str, str]) -> dict[str, str]:
        for name, command in probes.items():
            try:
                if not shlex.split(command):
                    raise ValueError("empty command")
            except ValueError as exc:
                raise ValueError(f"probes.{name}: {exc}: write one command with its arguments, e.g. "
                                 "'nvidia-smi --query-gpu=name --format=csv,noheader'") from None
        return probes

    def all_probes(self, kind: KindSpec) -> dict[str, str]:
        return {**DEFAULT_PROBES, **kind.probes, **self.probes}


@dataclass(frozen=True)
class Hardware:
    name: str
    vendor: str
    vendor_dir: Path
    vendor_spec: VendorSpec
    spec: AcceleratorSpec
    kind: KindSpec
    measured: dict = field(default_factory=dict)  # dtype -> MeasuredPeak: `accelbench calibrate`'s, if run

    @property
    def on_cpu(self) -> bool:
        return self.kind.torch_device == "cpu"

    @property
    def monitor(self) -> Union[MonitorName, CommandMonitorSpec]:
        return self.vendor_spec.monitor or self.kind.monitor

    def device_spec(self, framework: str) -> DeviceSpec:
        """The worker's part of the kind; a vendor's worker plugin is named in the vendor's folder as the node
        sees it (``{vendor_dir}``: training/contract/names.py)."""
        plugin = self.kind.worker_plugin
        if plugin and not plugin.startswith(VENDOR_DIR):
            plugin = f"{VENDOR_DIR}/{plugin}"
        spec = self.kind.device_spec(self.spec.kind, framework, plugin)
        return spec.model_copy(update={"monitor": self.monitor})

    @property
    def memory_total_bytes(self) -> Optional[int]:
        """The declared device memory, which reports show memory against (None: the worker's reading)."""
        return int(self.spec.memory_gib * 2**30) if self.spec.memory_gib else None

    def peak_tflops(self, precision: str) -> tuple[Optional[float], str]:
        """The peak for ``precision`` and, when there is none, why not."""
        key = PEAK_KEY_FOR_PRECISION.get(precision, precision)
        peak = self.spec.peak_tflops.get(key)
        if peak is None:  # the vendor's reason (peak_note); a CPU has no datasheet to copy one from: measure it
            calibrate = f"`accelbench calibrate {self.name}` measures one, and MFU is then shown against it"
            why = self.spec.peak_note or (f"a CPU has no datasheet peak (it depends on the model, clock and vector "
                                          f"units); {calibrate}" if self.on_cpu else
                                          f"set accelerators.{self.name}.peak_tflops.{key} in "
                                          f"{self.vendor_dir / 'vendor.yaml'}")
            if self.on_cpu and "accelbench calibrate" not in why:
                why += f"; {calibrate}"
            return None, f"no {key} peak for {self.name}: {why}"
        return peak, PEAK_BASIS.get(key, "")

    def measured_peak_tflops(self, precision: str) -> tuple[Optional[float], str]:
        """The GEMM peak ``accelbench calibrate`` measured for ``precision`` and a note naming it; else why not."""
        return measured_peaks.describe(self.measured, self.name, PEAK_KEY_FOR_PRECISION.get(precision, precision))


class VendorRegistry:
    """Loads every vendor: each folder of ``vendors_dir`` that has a ``vendor.yaml`` (``template`` excepted) and
    each installed vendor package's (catalog/vendor_folders.py)."""

    def __init__(self, vendors_dir: Path):
        self.vendors_dir = vendors_dir
        self.vendors: dict[str, VendorSpec] = {}
        self.folders = vendor_folders(vendors_dir)
        self.hardware: dict[str, Hardware] = {}
        self.kinds: Registry[KindSpec] = KINDS.copy()  # the shipped kinds and every vendor's own
        self.kind_sources: dict[str, Path] = {}
        specs = {folder.path / VENDOR_FILE: (name, load_model(VendorSpec, folder.path / VENDOR_FILE))
                 for name, folder in self.folders.items()}
        for path, (_, spec) in specs.items():
            for kind_name, kind in spec.kinds.items():
                self.kinds.register(kind_name, kind, where=f"{path}: kinds")
                self.kind_sources[kind_name] = path
        for path, (name, spec) in specs.items():
            self.vendors[name] = spec
            measured = measured_peaks.load(path.parent).accelerators  # validated now, not after a round
            for hw_name, accel in spec.accelerators.items():
                if hw_name in self.hardware:
                    other = self.hardware[hw_name].vendor_dir / "vendor.yaml"
                    raise UserError(f"{path}: accelerators.{hw_name} is also declared in {other}",
                                    "hardware names must be unique across vendors; rename one")
                if accel.kind not in self.kinds:
                    known = ", ".join(self.kinds)
                    raise UserError(f"{path}: accelerators.{hw_name}.kind: unknown accelerator kind {accel.kind!r}",
                                    f"use one of {known}, or declare it under kinds: in {path} "
                                    "(docs/vendor-onboarding.md, 'Your accelerator kind')")
                self.hardware[hw_name] = Hardware(hw_name, name, path.parent, spec, accel, self.kinds.get(accel.kind),
                                                   measured.get(hw_name, {}))

    def find_hardware(self, name: str) -> Hardware:
        if name in self.hardware:
            return self.hardware[name]
        by_case = {k.lower(): k for k in self.hardware}
        close = difflib.get_close_matches(name, list(self.hardware), n=1) or (
            [by_case[name.lower()]] if name.lower() in by_case else [])
        hint = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(sorted(self.hardware)) or "(none)"
        raise UserError(f"unknown hardware {name!r}: no vendor under {self.vendors_dir} nor any installed vendor "
                        "package declares it", f"{hint}known hardware: {known}; or add it to a vendor.yaml")


CONFIG_LAYOUT = re.compile(r"x(\d+)x(\d+)$")


def _normalized(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def accelerator_in_config_name(stem: str, spec: VendorSpec) -> Optional[str]:
    """The accelerator an extern config's name states: the part right before ``x<nnodes>x<nprocs>`` must end
    with a declared accelerator's name or one of its ``config_names`` (letters and digits only), so
    ``...A10040Gx1x8`` is A100_40G and ``config_fastx1x2`` is none. The longest name that fits wins."""
    layout = CONFIG_LAYOUT.search(stem)
    if layout is None:
        return None
    head = _normalized(stem[:layout.start()].removeprefix("config_"))
    spellings = sorted(((_normalized(alias), hw) for hw, accel in spec.accelerators.items()
                        for alias in (hw, *accel.config_names)), key=lambda item: len(item[0]), reverse=True)
    return next((hw for spelling, hw in spellings if spelling and head.endswith(spelling)), None)

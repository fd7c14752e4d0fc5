"""This rank's torch device, whatever the accelerator: through ``torch.accelerator``, never a vendor's module.

A kind names its torch device type (``DeviceSpec.torch_device``) and, where the
device comes from an out-of-tree backend (torch_npu, torch_mlu, ...), the module
that registers it; everything below then works the same for each.
"""
from __future__ import annotations

import importlib
from typing import Optional

import torch
import torch.distributed as dist

from training.harness import DeviceMemory
from training.contract.spec import DeviceSpec
from training.unsupported import UnsupportedOnDevice


def open_device(spec: DeviceSpec, local_rank: int) -> torch.device:
    """Make this rank's device current (one process per device, picked by its local rank)."""
    if spec.torch_module:
        importlib.import_module(spec.torch_module)  # registers the device type with torch
    if spec.is_cpu:
        return torch.device("cpu")
    built_for = torch.accelerator.current_accelerator()  # the build's device type, visible devices or not
    if built_for is None or built_for.type != spec.torch_device:
        raise UnsupportedOnDevice(f"this torch build ({torch.__version__}) has no {spec.torch_device} device "
                                  f"(accelerator kind {spec.kind}); its accelerator: "
                                  f"{built_for.type if built_for is not None else 'none'}")
    torch.accelerator.set_device_index(local_rank)
    return torch.device(spec.torch_device, local_rank)


def process_group_backend(spec: DeviceSpec, device: torch.device, offload: bool) -> str:
    """The device's collective backend; under offload also gloo for the CPU, where FSDP2 keeps the
    gradients and optimizer state (torchtitan's ``cuda:nccl,cpu:gloo``)."""
    backend = spec.backend or dist.get_default_backend_for_device(device)
    if offload and device.type != "cpu":
        return f"{device.type}:{backend},cpu:gloo"
    return backend


def init_process_group(spec: DeviceSpec, device: torch.device, offload: bool = False) -> bool:
    """Create the default process group for this worker; True when this call created it.

    A run started by the orchestrator has none yet, so this always creates it (and the worker destroys it
    in ``close``). A process that trains several workers in turn inside one process group (the parity
    tests' entry, ``tests/parity_worker.py``, creates it once per launch) already has one: it is reused,
    provided its backends cover the ones this worker needs (a ``cpu:gloo`` part for offload, say), and
    False is returned, so the worker leaves destroying it to whoever created it.
    """
    backend = process_group_backend(spec, device, offload)
    if dist.is_initialized():
        from torch.distributed.distributed_c10d import BackendConfig

        have = BackendConfig(dist.get_backend_config()).get_device_backend_map()
        need = BackendConfig(backend).get_device_backend_map()
        if any(have.get(kind) != name for kind, name in need.items()):
            raise RuntimeError(f"the process group already initialised has backends {have}; this worker needs "
                               f"{need} ({backend!r})")
        return False
    dist.init_process_group(backend, device_id=None if device.type == "cpu" else device)
    return True


def synchronize(device: torch.device) -> None:
    torch.accelerator.synchronize(device)


def memory(device: torch.device) -> DeviceMemory:
    _, total = torch.accelerator.get_memory_info(device)
    return DeviceMemory(peak_allocated=torch.accelerator.max_memory_allocated(device),
                        peak_reserved=torch.accelerator.max_memory_reserved(device), total=total)


def reset_peak_memory(device: torch.device) -> None:
    torch.accelerator.reset_peak_memory_stats(device)


def environment(device: torch.device) -> dict:
    env = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "torch_hip": getattr(torch.version, "hip", None), "torch_threads": torch.get_num_threads()}
    if device.type != "cpu":
        name = getattr(torch.get_device_module(device.type), "get_device_name", None)
        env["accelerator"] = name(device) if name is not None else None
        env["accelerator_count"] = torch.accelerator.device_count()
        driver = _nvidia_driver()
        if driver is not None:
            env["nvidia_driver"] = driver
        env["nccl"] = _nccl_version(device)  # the communication library (RCCL on ROCm), which certificates bind
    return env


def _nccl_version(device: torch.device) -> Optional[str]:
    """NCCL's (or RCCL's) version as torch was built with it; None off CUDA/ROCm or where it cannot say."""
    try:  # only where the device is driven by torch.cuda's module (CUDA, ROCm): no device name spelled out here
        if torch.get_device_module(device.type) is not torch.cuda:
            return None
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _nvidia_driver() -> Optional[str]:
    """The kernel driver's version line, where the host has NVIDIA's driver loaded."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return None


class OnTorchDevice:
    """The harness's device hooks for a worker whose rank runs on ``self.torch_device`` (pretraining and
    the PPO loop alike): one place that says how torch synchronises, reads and resets memory, and allocates."""

    torch_device: torch.device

    def synchronize(self) -> None:
        synchronize(self.torch_device)

    def memory(self) -> DeviceMemory:
        return memory(self.torch_device)

    def reset_peak_memory(self) -> None:
        reset_peak_memory(self.torch_device)

    def allocate(self, nbytes: int) -> object:
        return torch.empty(nbytes, dtype=torch.uint8, device=self.torch_device)

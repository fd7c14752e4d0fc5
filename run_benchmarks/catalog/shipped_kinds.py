"""The accelerator kinds accelbench ships, as plain data in the shape of a vendor.yaml's ``kinds:`` entry.

kinds.py registers each by path (``KINDS``), validated against ``KindSpec`` when first looked up; kept apart
from that schema so that ``accelbench list`` shows them without loading pydantic (catalog/listing.py).
"""
from __future__ import annotations

CPU = dict(
    description="this machine's CPU: one process per core group, no device to count",
    torch_device="cpu", paddle_device="cpu", backends={"torch": "gloo", "paddle": "gloo"}, monitor="cpu")

NVIDIA = dict(
    description="NVIDIA GPUs through CUDA",
    torch_device="cuda", paddle_device="gpu", visible_devices_env="CUDA_VISIBLE_DEVICES",
    device_count=[dict(command=["nvidia-smi", "-L"], pattern=r"^GPU (\d+):")],
    backends={"torch": "nccl", "paddle": "nccl"}, monitor="nvml", kubernetes_resource="nvidia.com/gpu",
    probes={"accelerator_models": "nvidia-smi --query-gpu=name --format=csv,noheader",
            "driver_version": "nvidia-smi --query-gpu=driver_version --format=csv,noheader",
            "gpu_clocks_max_mhz": "nvidia-smi --query-gpu=clocks.max.sm --format=csv,noheader,nounits",
            "topology": "nvidia-smi topo -m"})

ROCM = dict(
    description="AMD GPUs through ROCm: the frameworks' ROCm builds address them as cuda/gpu, RCCL behind "
                "nccl",
    torch_device="cuda", paddle_device="gpu", visible_devices_env="HIP_VISIBLE_DEVICES",
    device_count=[dict(command=["amd-smi", "list"], pattern=r"^GPU: (\d+)"),
                  dict(command=["rocm-smi", "--showid"], pattern=r"^GPU\[(\d+)\]")],
    backends={"torch": "nccl", "paddle": "nccl"}, monitor="rocm-smi", kubernetes_resource="amd.com/gpu",
    probes={"rocm_version": "cat /opt/rocm/.info/version",
            "accelerator_models": "rocm-smi --showproductname --json",
            "driver_version": "cat /sys/module/amdgpu/version"})

SHIPPED_KINDS: dict[str, dict] = {"cpu": CPU, "nvidia": NVIDIA, "rocm": ROCM}

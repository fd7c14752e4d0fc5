"""The micro-benchmarks' operations in torch: ``torch.accelerator`` and ``torch.distributed``, so the CPU
tests run the device code (gloo on a CPU, the device's own backend elsewhere)."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.distributed as dist

from training import harness
from training.micro.ops import Call, MicroOps
from training.contract.spec import DeviceSpec
from training.torch import device as devices
from training.unsupported import UnsupportedOnDevice

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_gemm(m: int, n: int, k: int, dtype: str, device: torch.device) -> Callable[[], torch.Tensor]:
    """The product the benchmark times, its operands allocated once (so allocation is not timed)."""
    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # _scaled_mm: column-major B
        scale = torch.ones((), device=device)

        def fp8_product() -> torch.Tensor:
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        try:  # whether the device has fp8 units is the device's to say: ask it once, untimed
            fp8_product()
        except (RuntimeError, NotImplementedError) as exc:
            raise UnsupportedOnDevice(f"fp8 GEMM (torch._scaled_mm) does not run on {device.type}: {exc}") from None
        return fp8_product
    if dtype == "tf32" and (device.type == "cpu" or not torch.backends.cuda.is_built()):
        raise UnsupportedOnDevice(f"tf32 is a tensor-core mode of torch's CUDA backend; {device.type} has none")
    a = torch.randn(m, k, device=device, dtype=_DTYPES[dtype])
    b = torch.randn(k, n, device=device, dtype=_DTYPES[dtype])
    out = torch.empty(m, n, device=device, dtype=_DTYPES[dtype])
    return lambda: torch.matmul(a, b, out=out)


class TorchOps(MicroOps):
    framework, version = "torch", torch.__version__

    def __init__(self, torch_device: torch.device, spec: DeviceSpec | None = None):
        self.torch_device, self.spec = torch_device, spec
        self.device, self.on_cpu = str(torch_device), torch_device.type == "cpu"

    @classmethod
    def open(cls, spec: DeviceSpec, local_rank: int) -> "TorchOps":
        return cls(devices.open_device(spec, local_rank), spec)

    def synchronize(self) -> None:
        if not self.on_cpu:  # a CPU runs each operation before returning
            devices.synchronize(self.torch_device)

    @contextlib.contextmanager
    def matmul_precision(self, dtype: str) -> Iterator[None]:
        torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision("highest")

    def gemm(self, m: int, n: int, k: int, dtype: str) -> Call:
        return make_gemm(m, n, k, dtype, self.torch_device)

    def stream(self, elements: int) -> dict[str, Call]:
        a = torch.ones(elements, device=self.torch_device)
        b, c = torch.empty_like(a), torch.full_like(a, 2.0)
        kernels = {"copy": lambda: b.copy_(a), "triad": lambda: torch.add(b, c, alpha=3.0, out=a)}
        if not self.on_cpu:
            host = torch.ones(elements, pin_memory=True)
            kernels["h2d"] = lambda: a.copy_(host, non_blocking=True)
            kernels["d2h"] = lambda: host.copy_(a, non_blocking=True)
        return kernels

    def tiny_kernel(self) -> Call:
        one = torch.zeros(1, device=self.torch_device)
        return lambda: one.add_(1)

    def open_group(self) -> None:
        if self.spec is None:  # python -m training.micro: gloo on a CPU, else the device's default backend
            dist.init_process_group(backend="gloo" if self.on_cpu else None,
                                    device_id=None if self.on_cpu else self.torch_device)
        else:
            devices.init_process_group(self.spec, self.torch_device)

    def close_group(self) -> None:
        dist.destroy_process_group()

    def world_size(self) -> int:
        return dist.get_world_size()

    def barrier(self) -> None:
        dist.barrier()

    def collective(self, op: str, elements: int) -> Call:
        world = dist.get_world_size()
        full = torch.ones(elements, device=self.torch_device)
        part = torch.ones(elements // world, device=self.torch_device)
        calls = {
            "allreduce": lambda: dist.all_reduce(full),
            "broadcast": lambda: dist.broadcast(full, src=0),
            "reduce": lambda: dist.reduce(full, dst=0),
            "allgather": lambda: dist.all_gather_into_tensor(full, part),
            "reducescatter": lambda: dist.reduce_scatter_tensor(part, full),
        }
        if op == "alltoall":
            out = torch.empty_like(full)
            calls[op] = lambda: dist.all_to_all_single(out, full)
        if op == "sendrecv":
            calls[op] = self._sendrecv(full, world)
        return calls[op]

    def _sendrecv(self, full: torch.Tensor, world: int) -> Call:
        """``full`` to rank+1 and as many elements from rank-1 in one ``batch_isend_irecv``, waited for (a device
        backend coalesces the pair; gloo issues them one by one)."""
        if world < 2 and dist.get_backend() == "gloo":  # NCCL copies to itself; gloo refuses a send to itself
            raise UnsupportedOnDevice("sendrecv on 1 rank sends to the rank itself, which torch's gloo process "
                                      "group does not do: run it on 2 or more ranks")
        rank, received = dist.get_rank(), torch.empty_like(full)
        pair = [dist.P2POp(dist.isend, full, (rank + 1) % world), dist.P2POp(dist.irecv, received, (rank - 1) % world)]

        def sendrecv() -> None:
            for work in dist.batch_isend_irecv(pair):
                work.wait()
        return sendrecv

    def slowest(self, seconds: float) -> float:
        t = torch.tensor([seconds], dtype=torch.float64, device=self.torch_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def environment(self) -> dict:
        return devices.environment(self.torch_device)

    def memory(self) -> harness.DeviceMemory:
        return devices.memory(self.torch_device)

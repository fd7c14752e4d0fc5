"""The micro-benchmarks' operations in torch: ``torch.accelerator`` and ``torch.distributed``, so the CPU
tests run the device code (gloo on a CPU, the device's own backend elsewhere)."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.distributed as dist

from training import harness
from training.micro.ops import SAMPLE, Call, MicroOps, with_operands
from training.contract.spec import DeviceSpec
from training.torch import device as devices
from training.unsupported import UnsupportedOnDevice

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def random_tensor(shape: tuple[int, ...], seed: int, device: torch.device,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Operands drawn from a normal distribution by a CPU generator seeded with ``seed`` (the same values on
    every device and build), then moved: never constant (MICRO_INPUTS), allocated before any clock starts."""
    values = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return values.to(device=device, dtype=dtype)


def gemm_operands(m: int, n: int, k: int, dtype: str, device: torch.device, seed: int) -> tuple[torch.Tensor, ...]:
    """(A, B) of the timed product: random normal from ``seed`` (B from ``seed + 1``); fp8's B column-major."""
    if dtype == "fp8":
        return (random_tensor((m, k), seed, device).to(torch.float8_e4m3fn),
                random_tensor((n, k), seed + 1, device).to(torch.float8_e4m3fn).t())  # _scaled_mm: column-major B
    return random_tensor((m, k), seed, device, _DTYPES[dtype]), random_tensor((k, n), seed + 1, device, _DTYPES[dtype])


def make_gemm(m: int, n: int, k: int, dtype: str, device: torch.device, seed: int = 1234) -> Callable[[], torch.Tensor]:
    """The product the benchmark times, its operands allocated once (so allocation is not timed)."""
    if dtype == "fp8":
        a, b = gemm_operands(m, n, k, dtype, device, seed)
        scale = torch.ones((), device=device)

        def fp8_product() -> torch.Tensor:
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        with_operands(fp8_product, a, b)
        try:  # whether the device has fp8 units is the device's to say: ask it once, untimed
            fp8_product()
        except (RuntimeError, NotImplementedError) as exc:
            raise UnsupportedOnDevice(f"fp8 GEMM (torch._scaled_mm) does not run on {device.type}: {exc}") from None
        return fp8_product
    if dtype == "tf32" and (device.type == "cpu" or not torch.backends.cuda.is_built()):
        raise UnsupportedOnDevice(f"tf32 is a tensor-core mode of torch's CUDA backend; {device.type} has none")
    a, b = gemm_operands(m, n, k, dtype, device, seed)
    out = torch.empty(m, n, device=device, dtype=_DTYPES[dtype])
    return with_operands(lambda: torch.matmul(a, b, out=out), a, b)


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

    def gemm(self, m: int, n: int, k: int, dtype: str, seed: int) -> Call:
        return make_gemm(m, n, k, dtype, self.torch_device, seed)

    def stream(self, elements: int, seed: int) -> dict[str, Call]:
        a = random_tensor((elements,), seed, self.torch_device)
        b, c = torch.empty_like(a), random_tensor((elements,), seed + 1, self.torch_device)
        kernels = {"copy": with_operands(lambda: b.copy_(a), a),
                   "triad": with_operands(lambda: torch.add(b, c, alpha=3.0, out=a), b, c)}
        if not self.on_cpu:
            host = random_tensor((elements,), seed + 2, torch.device("cpu")).pin_memory()
            kernels["h2d"] = with_operands(lambda: a.copy_(host, non_blocking=True), host)
            kernels["d2h"] = with_operands(lambda: host.copy_(a, non_blocking=True), a)
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

    def collective(self, op: str, elements: int, seed: int) -> Call:
        world, rank = dist.get_world_size(), dist.get_rank()
        full = random_tensor((elements,), seed + 2 * rank, self.torch_device)  # each rank its own values
        part = random_tensor((elements // world,), seed + 2 * rank + 1, self.torch_device)
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
        return with_operands(calls[op], full if op not in ("allgather",) else part)

    def is_constant(self, tensor: torch.Tensor) -> bool:
        if not tensor.is_contiguous() and tensor.dim() == 2:  # fp8's column-major B: its storage order
            tensor = tensor.t()
        sample = tensor.reshape(-1)[:SAMPLE].to(torch.float32)  # fp8 has few ops beyond conversion
        return sample.numel() > 1 and bool((sample == sample[0]).all())

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

"""The micro-benchmarks' operations in Paddle: ``paddle.set_device``, ``paddle.device.synchronize`` and
``paddle.distributed``, so the CPU tests (gloo) run the code a device runs.

What Paddle 3.3 cannot do on a place is found by asking it once, untimed, and ends the round
``unsupported`` with Paddle's own reason: on a CPU, matmul has no bf16, fp16 or fp8 kernels, and the gloo
process group has no reduce-scatter and no all-to-all ("ProcessGroupGLOO does not support ..."). Its sendrecv is
``unsupported`` without asking (``_sendrecv`` says why: asking would hang until gloo's timeout).
``training/paddle/cpu_compat.py`` emulates reduce-scatter with an all-reduce for fleet's layers; it is never
installed here, so an emulation is never measured as the collective.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import paddle
import paddle.distributed as dist

from training import harness
from training.micro.ops import SAMPLE, Call, MicroOps, first_line, with_operands
from training.paddle import device as devices
from training.paddle.precision import TF32_FLAGS, flags_in_build
from training.contract.spec import DeviceSpec
from training.unsupported import UnsupportedOnDevice

_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
_OP_NAMES = {"allreduce": "all_reduce", "broadcast": "broadcast", "allgather": "all_gather",
             "reducescatter": "reduce_scatter", "alltoall": "alltoall_single", "reduce": "reduce",
             "sendrecv": "batch_isend_irecv"}
# Paddle's error classes for an operation its build or backend lacks (a kernel not registered for the dtype
# on the place, a process group without the collective); anything else (out of memory) stays a failure.
_MISSING_CLASSES = ("(NotFound)", "(Unimplemented)", "(Unavailable)")


def random_tensor(shape: list[int], seed: int) -> "paddle.Tensor":
    """fp32 operands drawn from a normal distribution by NumPy's generator seeded with ``seed`` (the same values
    on every device and build), on the current place: never constant (MICRO_INPUTS), made before any clock."""
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


def _missing(exc: Exception) -> bool:
    return isinstance(exc, NotImplementedError) or first_line(exc).startswith(_MISSING_CLASSES)


class PaddleOps(MicroOps):
    framework, version = "paddle", paddle.__version__

    def __init__(self, spec: DeviceSpec):
        self.spec = spec
        self.device = devices.open_device(spec)  # "cpu", "gpu:0", "npu:1", ...: the launcher picks the index
        self.on_cpu = spec.paddle_device == "cpu"

    @classmethod
    def open(cls, spec: DeviceSpec, local_rank: int) -> "PaddleOps":
        return cls(spec)

    def synchronize(self) -> None:
        if not self.on_cpu:  # a CPU runs each operation before returning (and Paddle refuses to sync one)
            devices.synchronize()

    @contextlib.contextmanager
    def matmul_precision(self, dtype: str) -> Iterator[None]:
        """TF32 on for tf32 and off otherwise where the build has the switch (Paddle's CUDA builds allow TF32
        in fp32 matmuls by default, which would count TF32 work as fp32)."""
        flags = flags_in_build(TF32_FLAGS)
        if dtype == "tf32" and not flags:
            raise UnsupportedOnDevice(f"tf32 is a tensor-core mode of Paddle's CUDA builds ({TF32_FLAGS[0]}); "
                                      f"this build ({paddle.__version__}) on {self.device} has no such switch")
        before = paddle.get_flags(flags)
        paddle.set_flags({name: dtype == "tf32" for name in flags})
        try:
            yield
        finally:
            paddle.set_flags(before)

    def gemm(self, m: int, n: int, k: int, dtype: str, seed: int) -> Call:
        name = _DTYPES[dtype]
        a, b = random_tensor([m, k], seed).astype(name), random_tensor([k, n], seed + 1).astype(name)
        try:  # whether the place has a matmul kernel for the dtype is Paddle's to say: ask it once, untimed
            out = paddle.matmul(a, b)
        except (NotImplementedError, RuntimeError) as exc:
            if not _missing(exc):
                raise
            raise UnsupportedOnDevice(f"{dtype} GEMM (paddle.matmul in {name}) does not run on {self.device} "
                                      f"with Paddle {paddle.__version__}: {first_line(exc)}") from None
        return with_operands(lambda: paddle.matmul(a, b, out=out), a, b)

    def stream(self, elements: int, seed: int) -> dict[str, Call]:
        a = random_tensor([elements], seed)
        b, c = paddle.empty_like(a), random_tensor([elements], seed + 1)
        # paddle.add's alpha is a separate scale kernel with a temporary (two more arrays moved per call, 4x
        # the time on a CPU): s*c is made before the clock, so the timed kernel reads b and 3c and writes a,
        # the three arrays STREAM's triad moves.
        c3 = paddle.scale(c, 3.0)
        kernels = {"copy": with_operands(lambda: paddle.assign(a, output=b), a),
                   "triad": with_operands(lambda: paddle.add(b, c3, out=a), b, c3)}
        if not self.on_cpu:
            host = a.cpu().pin_memory()
            kernels["h2d"] = with_operands(lambda: a.copy_(host, False), host)
            kernels["d2h"] = with_operands(lambda: host.copy_(a, False), a)
        return kernels

    def is_constant(self, tensor) -> bool:
        sample = tensor.flatten()[:SAMPLE].astype("float32")
        return int(sample.shape[0]) > 1 and bool((sample == sample[0]).all())

    def tiny_kernel(self) -> Call:
        one, step = paddle.zeros([1]), paddle.ones([1])
        return lambda: paddle.add(one, step, out=one)

    def open_group(self) -> None:
        # The world group alone: what fleet.init(is_collective=True) starts under the training worker's
        # hybrid groups; gloo on a CPU place, the device's own backend elsewhere.
        dist.init_parallel_env()

    def close_group(self) -> None:
        pass  # Paddle's groups end with the process

    def world_size(self) -> int:
        return dist.get_world_size()

    def barrier(self) -> None:
        dist.barrier()

    def collective(self, op: str, elements: int, seed: int) -> Call:
        world, rank = dist.get_world_size(), dist.get_rank()
        full = random_tensor([elements], seed + 2 * rank)  # each rank its own values
        part = random_tensor([elements // world], seed + 2 * rank + 1)
        calls = {
            "allreduce": lambda: dist.all_reduce(full),
            "broadcast": lambda: dist.broadcast(full, src=0),
            "reduce": lambda: dist.reduce(full, dst=0),
            "allgather": lambda: dist.all_gather(full, part),  # a tensor as the list: into one buffer
            "reducescatter": lambda: dist.reduce_scatter(part, full),
        }
        if op == "alltoall":
            out = paddle.empty_like(full)
            calls[op] = lambda: dist.alltoall_single(out, full)
        if op == "sendrecv":
            calls[op] = _sendrecv(full, world)
        try:  # every rank asks, so every rank finds out (gloo refuses before any rank sends)
            calls[op]()
        except (NotImplementedError, RuntimeError) as exc:
            if not _missing(exc):
                raise
            raise UnsupportedOnDevice(f"{op}: paddle.distributed.{_OP_NAMES[op]} does not run on {self.device} "
                                      f"with Paddle {paddle.__version__}'s {_backend()} process group: "
                                      f"{first_line(exc)}") from None
        return with_operands(calls[op], full if op != "allgather" else part)

    def slowest(self, seconds: float) -> float:
        t = paddle.to_tensor([seconds], dtype="float64")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def environment(self) -> dict:
        return devices.environment(self.spec)

    def memory(self) -> harness.DeviceMemory:
        return devices.memory(self.spec)


def _sendrecv(full, world: int):
    """``full`` to rank+1 and as many elements from rank-1 in one ``paddle.distributed.batch_isend_irecv``, each
    task waited for. Not on a GLOO group: its isend returns only once the peer has received (seen here: a 4 KiB
    isend returned after the 3 s its peer slept before its irecv), so each rank's send of the pair waits for a
    receive its peer posts only after its own send, and the batch hangs until gloo's timeout: asked of the
    backend's name, not by calling it."""
    if _backend().upper() == "GLOO":
        raise UnsupportedOnDevice(f"sendrecv: paddle.distributed.batch_isend_irecv does not run on "
                                  f"{paddle.get_device()} with Paddle {paddle.__version__}'s GLOO process group: its "
                                  "isend waits for the peer's receive, so a send and a receive issued together on "
                                  "every rank deadlock until gloo's timeout")
    rank, received = dist.get_rank(), paddle.empty_like(full)

    def sendrecv() -> None:
        for task in dist.batch_isend_irecv([dist.P2POp(dist.isend, full, (rank + 1) % world),
                                            dist.P2POp(dist.irecv, received, (rank - 1) % world)]) or []:
            task.wait()
    return sendrecv


def _backend() -> str:
    """The world group's backend as Paddle names it (GLOO, NCCL, ...)."""
    try:
        return dist.get_backend()
    except Exception:  # noqa: BLE001 - a name for the message only
        return "default"

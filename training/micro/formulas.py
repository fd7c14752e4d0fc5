"""The formulas every micro-benchmark figure is computed with, stated once (and tested).

Collective bandwidths follow nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, and busbw = algbw x a
factor per operation that makes it comparable with the hardware's link bandwidth whatever the rank count.
"""
from __future__ import annotations

from typing import Callable

GEMM_FORMULA = "TFLOP/s = 2*M*N*K / time / 1e12 (one multiply and one add per term)"


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an (M x K) @ (K x N) product."""
    return 2 * m * n * k


BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,  # to one root: every byte crosses one link into the root once, like broadcast
    # each rank sends the message to rank+1 while receiving one from rank-1: each byte crosses one link once
    # (nccl-tests' src/sendrecv.cu: factor 1, busBw = algBw)
    "sendrecv": lambda n: 1.0,
}
BUS_FACTOR_TEXT = {"allreduce": "2(n-1)/n", "allgather": "(n-1)/n", "reducescatter": "(n-1)/n",
                   "alltoall": "(n-1)/n", "broadcast": "1", "reduce": "1", "sendrecv": "1"}


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s: the message size over the time."""
    return nbytes / seconds


def busbw(op: str, nbytes: int, seconds: float, world_size: int) -> float:
    """Bus bandwidth in bytes/s, as nccl-tests defines it."""
    return algbw(nbytes, seconds) * BUS_FACTORS[op](world_size)


# STREAM (McCalpin): bytes a kernel moves per element, counting each read and each write once.
STREAM_BYTES_PER_ELEMENT = {"copy": 2, "triad": 3}  # copy: b = a; triad: a = b + s*c

"""What a framework brings to the micro-benchmarks: its device, its operations and its process group.

The benchmarks themselves (gemm.py, membw.py, collectives.py: the loops over sizes and dtypes, the timed
loop, the formulas, the records) are framework-free and call only this interface, so torch
(``torch_ops.py``) and Paddle (``paddle_ops.py``) are measured by one piece of code. An operation the
framework or its backend lacks raises ``UnsupportedOnDevice`` naming what is missing, never a stand-in.
"""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Callable, ContextManager

from training.contract.micro import MICRO_INPUTS
from training.harness import DeviceMemory
from training.contract.spec import DeviceSpec

Call = Callable[[], object]
CONSTANT, UNSTATED = "constant", "unstated"  # what inputs_of says where the operands are not MICRO_INPUTS
SAMPLE = 4096  # elements of each operand looked at: constant operands are constant in any sample


def with_operands(call: Call, *operands) -> Call:
    """``call`` carrying the tensors it reads, for ``MicroOps.inputs_of`` (a function takes attributes)."""
    call.operands = operands  # type: ignore[attr-defined]
    return call


class MicroOps(ABC):
    """One rank's framework and device. Attributes: ``framework`` and ``version`` (name and version),
    ``device`` (the framework's name for this rank's device), ``on_cpu``."""

    framework: str
    version: str
    device: str
    on_cpu: bool

    @classmethod
    @abstractmethod
    def open(cls, spec: DeviceSpec, local_rank: int) -> "MicroOps":
        """Make this rank's device current (a vendor's device the build lacks: ``UnsupportedOnDevice``)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for the device's queued work (nothing to wait for on a CPU)."""

    @abstractmethod
    def is_constant(self, tensor) -> bool:
        """Whether the first SAMPLE elements of ``tensor`` are all one value (all ones, all zeros)."""

    def inputs_of(self, call: Call) -> str:
        """What a timed call's operands are, as its figures state it: MICRO_INPUTS (random, none constant),
        CONSTANT, or UNSTATED where the operations did not hand their operands over (``with_operands``)."""
        operands = getattr(call, "operands", None)
        if not operands:
            return UNSTATED
        return CONSTANT if any(self.is_constant(t) for t in operands) else MICRO_INPUTS

    # GEMM
    def matmul_precision(self, dtype: str) -> ContextManager:
        """The matmul math ``dtype`` names, for the products made and timed inside (fp32 is IEEE fp32 on a
        tensor-core device too: tf32 is its own row)."""
        return contextlib.nullcontext()

    @abstractmethod
    def gemm(self, m: int, n: int, k: int, dtype: str, seed: int) -> Call:
        """One (M x K) @ (K x N) product in ``dtype``, operands allocated once (allocation is not timed) and drawn
        from a normal distribution seeded with ``seed``: never constant (MICRO_INPUTS)."""

    # memory bandwidth
    @abstractmethod
    def stream(self, elements: int, seed: int) -> dict[str, Call]:
        """Kernels over fp32 arrays of ``elements`` (random normal from ``seed``): ``copy`` (b = a) and ``triad``
        (a = b + s*c), each reading and writing every array once; on a device also ``h2d`` and ``d2h`` (one
        array to and from pinned host memory)."""

    @abstractmethod
    def tiny_kernel(self) -> Call:
        """A one-element kernel (launch latency; devices only)."""

    # collectives
    @abstractmethod
    def open_group(self) -> None:
        """Join the process group of every rank of the round (the device's collective backend)."""

    @abstractmethod
    def close_group(self) -> None: ...

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def collective(self, op: str, elements: int, seed: int) -> Call:
        """The collective ``op`` over fp32 buffers (random normal from ``seed`` and the rank): ``elements`` in the whole (all-reduce, broadcast,
        all-to-all; all-gather's output, reduce-scatter's input), ``elements / world`` in each rank's part.
        ``sendrecv`` (nccl-tests' sendrecv_perf): every rank sends ``elements`` to rank+1 while it receives as
        many from rank-1 (mod world), both issued together and waited for."""

    @abstractmethod
    def slowest(self, seconds: float) -> float:
        """The maximum of every rank's ``seconds`` (an all-reduce MAX)."""

    # records
    @abstractmethod
    def environment(self) -> dict:
        """Facts about the framework and the device, for the node's environment."""

    @abstractmethod
    def memory(self) -> DeviceMemory:
        """The device allocator's peaks (never asked on a CPU: the process's peak RSS is used)."""


def first_line(exc: BaseException) -> str:
    """A framework error's first line (Paddle's carry pages of C++ hints below it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

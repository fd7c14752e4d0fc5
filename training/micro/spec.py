"""What a micro-benchmark case asks: which benchmark, at which sizes, in which dtypes, how many iterations.
Validated like the worker config, so a typo fails before anything runs."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, NonNegativeInt

Bench = Literal["gemm", "membw", "collective"]
Op = Literal["allreduce", "allgather", "reducescatter", "alltoall", "broadcast"]
GemmDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]

_MAX_BYTES = 1 << 36  # 64 GiB: past any device's memory; a typo fails at validation, not at allocation


class MicroSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bench: Bench
    op: Optional[Op] = Field(None, description="collective: the operation")
    dtypes: tuple[GemmDtype, ...] = Field(("fp32",), min_length=1, description="gemm: the precisions")
    shapes: tuple[tuple[PositiveInt, PositiveInt, PositiveInt], ...] = Field(
        ((256, 256, 256), (512, 512, 512), (1024, 1024, 1024)), min_length=1,
        description="gemm: (M, N, K) of each product, square and transformer-shaped")
    sizes_bytes: tuple[PositiveInt, ...] = Field(
        (1 << 10, 1 << 16, 1 << 20, 1 << 24), min_length=1,
        description="collective: message sizes; membw: bytes per array")
    warmup: NonNegativeInt = Field(3, le=10_000, description="iterations run before the clock starts, untimed")
    iters: PositiveInt = Field(10, le=1_000_000, description="timed iterations; the figure is their average")

    def model_post_init(self, _context) -> None:
        if self.bench == "collective" and self.op is None:
            raise ValueError("bench collective needs op: allreduce, allgather, reducescatter, alltoall or broadcast")
        if any(s > _MAX_BYTES for s in self.sizes_bytes):
            raise ValueError(f"sizes_bytes above {_MAX_BYTES} (64 GiB) exceed any device's memory")

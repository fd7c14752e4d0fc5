"""Task micro's section (``MicroSpec``: which benchmark, at which sizes, in which dtypes, how many iterations;
validated like the worker config, so a typo fails before anything runs) and its place in the workload schema: a
micro-benchmark measures the device, not a model.

The orchestrator's plan, terminal and reports read ``model`` and ``train`` of every workload, so a micro
workload gets a fixed stand-in for both (one step of a one-layer model of width 1) instead of making them
optional everywhere; no worker reads it (training/micro/case.py runs the ``micro`` section). A case that sets
either is refused, so the stand-in is never taken for a real setting.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

MICRO_STAND_IN = {"model": {"family": "none", "n_layer": 1, "n_head": 1, "d_model": 1, "vocab_size": 1, "seq_len": 1},
                  "train": {"micro_batch_size": 1, "steps": 1, "warmup_steps": 0}}


def _is_stand_in(spec: type[BaseModel], value: Any, stand_in: dict) -> bool:
    """Unset, or the stand-in itself (a resolved config read again, its defaults written out)."""
    if value in (None, {}):
        return True
    try:
        return spec.model_validate(value) == spec.model_validate(stand_in)
    except ValueError:
        return False


def with_stand_in(data: Any, model_spec: type[BaseModel], train_spec: type[BaseModel]) -> Any:
    """A micro workload's raw data with the stand-in model and train; anything else unchanged."""
    if not isinstance(data, dict) or data.get("task") != "micro":
        return data
    given = [key for key, spec in (("model", model_spec), ("train", train_spec))
             if not _is_stand_in(spec, data.get(key), MICRO_STAND_IN[key])]
    if given:
        raise ValueError(f"task micro trains no model: remove {' and '.join(given)} (the micro section sets the "
                         "sizes and iterations)")
    return {**data, **MICRO_STAND_IN}


Bench = Literal["gemm", "membw", "collective"]
Op = Literal["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"]
GemmDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]

_MAX_BYTES = 1 << 36  # 64 GiB: past any device's memory; a typo fails at validation, not at allocation
# What every micro-benchmark's operands are, stated in each figure's params with the seed: random normal, never
# constant (all-ones or all-zeros operands run faster on some hardware: zero-skipping, compressed memory).
MICRO_INPUTS = "normal"


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
    seed: int = Field(1234, description="the operands are drawn from a normal distribution by a generator seeded "
                                        "with this (never constant), stated in every figure's params")

    def model_post_init(self, _context) -> None:
        if self.bench == "collective" and self.op is None:
            raise ValueError("bench collective needs op: allreduce, allgather, reducescatter, alltoall, broadcast, "
                             "reduce or sendrecv")
        if any(s > _MAX_BYTES for s in self.sizes_bytes):
            raise ValueError(f"sizes_bytes above {_MAX_BYTES} (64 GiB) exceed any device's memory")

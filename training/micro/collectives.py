"""Collective bandwidth per message size, as nccl-tests measures it: each rank times its average iteration
after warm-up with the device synchronised, the slowest rank's time is the operation's time, and algbw and
busbw follow from it (formulas.py). Framework-free: the operation comes from ``MicroOps.collective``."""
from __future__ import annotations

from typing import Iterator

from training.contract import perflog
from training.micro.formulas import BUS_FACTOR_TEXT, busbw, algbw
from training.micro.ops import MicroOps
from training.contract.micro import MicroSpec
from training.micro.timing import average_seconds

FP32_BYTES = 4


def elements(nbytes: int, world: int) -> int:
    """fp32 elements of a message of ``nbytes``, rounded down to a multiple of the rank count (each rank's
    part is whole). The message size in nccl-tests' terms is then elements x 4: the whole buffer for
    all-reduce, broadcast and reduce, the gathered (all-gather) or scattered (reduce-scatter) whole, each rank's
    total for all-to-all, what each rank sends (and receives) for sendrecv."""
    return max(world, nbytes // FP32_BYTES // world * world)


def run(spec: MicroSpec, ops: MicroOps, rank: int) -> Iterator[perflog.FigureRecord]:
    world, op = ops.world_size(), spec.op
    formula_time = f"max over {world} ranks of the mean of {spec.iters} iterations after {spec.warmup} warm-up"
    for size in spec.sizes_bytes:
        count = elements(size, world)
        call, nbytes = ops.collective(op, count, spec.seed), count * FP32_BYTES
        inputs = ops.inputs_of(call)  # before it runs: an all-reduce sums into its own buffer
        ops.barrier()
        seconds = ops.slowest(average_seconds(call, spec.warmup, spec.iters, ops.synchronize))
        params = {"op": op, "bytes": nbytes, "dtype": "fp32", "ranks": world, "inputs": inputs,
                  "seed": spec.seed}
        # every rank reports the group's figures (already the slowest rank's), so any reduction agrees
        yield perflog.FigureRecord(rank=rank, name=f"{op}.time_s", value=seconds, unit="s", better="lower",
                                   reduce="max", params=params, formula=formula_time)
        yield perflog.FigureRecord(rank=rank, name=f"{op}.algbw_gbps", value=algbw(nbytes, seconds) / 1e9,
                                   unit="GB/s", reduce="min", params=params, formula="algbw = bytes / time")
        yield perflog.FigureRecord(rank=rank, name=f"{op}.busbw_gbps",
                                   value=busbw(op, nbytes, seconds, world) / 1e9, unit="GB/s", reduce="min",
                                   params=params, formula=f"busbw = algbw x {BUS_FACTOR_TEXT[op]}, n = {world}")

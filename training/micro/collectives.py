"""Collective bandwidth per message size, as nccl-tests measures it: each rank times its average iteration
after warm-up with the device synchronised, the slowest rank's time is the operation's time, and algbw and
busbw follow from it (formulas.py)."""
from __future__ import annotations

from typing import Callable, Iterator

import torch
import torch.distributed as dist

from training import perflog
from training.micro.formulas import BUS_FACTOR_TEXT, busbw, algbw
from training.micro.spec import MicroSpec
from training.micro.timing import average_seconds, synchronizer


def make_op(op: str, nbytes: int, world: int, device: torch.device) -> tuple[Callable[[], object], int]:
    """The call to time and the message size it moves, in nccl-tests' terms: the whole buffer for all-reduce
    and broadcast, the gathered (all-gather) or scattered (reduce-scatter) whole, each rank's total for
    all-to-all. Sizes are rounded down to a multiple of the rank count's elements."""
    count = max(world, nbytes // 4 // world * world)
    full = torch.ones(count, device=device)
    part = torch.ones(count // world, device=device)
    calls = {
        "allreduce": lambda: dist.all_reduce(full),
        "broadcast": lambda: dist.broadcast(full, src=0),
        "allgather": lambda: dist.all_gather_into_tensor(full, part),
        "reducescatter": lambda: dist.reduce_scatter_tensor(part, full),
    }
    if op == "alltoall":
        out = torch.empty_like(full)
        calls[op] = lambda: dist.all_to_all_single(out, full)
    return calls[op], count * 4


def slowest(seconds: float, device: torch.device) -> float:
    """The maximum of every rank's time."""
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def run(spec: MicroSpec, device: torch.device, rank: int) -> Iterator[perflog.FigureRecord]:
    sync, world, op = synchronizer(device), dist.get_world_size(), spec.op
    formula_time = f"max over {world} ranks of the mean of {spec.iters} iterations after {spec.warmup} warm-up"
    for size in spec.sizes_bytes:
        call, nbytes = make_op(op, size, world, device)
        dist.barrier()
        seconds = slowest(average_seconds(call, spec.warmup, spec.iters, sync), device)
        params = {"op": op, "bytes": nbytes, "dtype": "fp32", "ranks": world}
        # every rank reports the group's figures (already the slowest rank's), so any reduction agrees
        yield perflog.FigureRecord(rank=rank, name=f"{op}.time_s", value=seconds, unit="s", better="lower",
                                   reduce="max", params=params, formula=formula_time)
        yield perflog.FigureRecord(rank=rank, name=f"{op}.algbw_gbps", value=algbw(nbytes, seconds) / 1e9,
                                   unit="GB/s", reduce="min", params=params, formula="algbw = bytes / time")
        yield perflog.FigureRecord(rank=rank, name=f"{op}.busbw_gbps",
                                   value=busbw(op, nbytes, seconds, world) / 1e9, unit="GB/s", reduce="min",
                                   params=params, formula=f"busbw = algbw x {BUS_FACTOR_TEXT[op]}, n = {world}")

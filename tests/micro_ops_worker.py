"""Every collective micro-benchmark in one launch: ``python -m torch.distributed.run --nproc_per_node=N -m
tests.micro_ops_worker [--then-on M] SPEC_JSON...``. Each spec runs through the worker's own ``figures`` with
torch's operations, in one process group, one after another, as ``python -m training.micro`` runs one (which
the CLI's micro cases launch); the test compares each op's records with nccl-tests' formulas.

``--then-on M`` (M < N): then ranks 0..M-1 run every spec again in a gloo group of M of their own (its
store on a port rank 0 chose and sent over the first group: a ``tcp://`` rendezvous would, under torchrun, look
for the agent's store there), the others end: the figures of a second
world size without a second torchrun and its ranks' imports. Each record line starts with ``world=<size> ``
(perflog finds its prefix anywhere in a line), as the ranks' lines interleave on the launcher's stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

from training.contract import perflog
from training.micro.case import figures
from training.contract.micro import MicroSpec
from training.micro.torch_ops import TorchOps

from .torch_ranks import free_port


def _measure(specs: list[str], ops: TorchOps, rank: int) -> None:
    world = ops.world_size()
    for text in specs:
        for record in figures(MicroSpec.model_validate(json.loads(text)), ops, rank):
            sys.stdout.write(f"world={world} {perflog.format_record(record)}\n")  # one write: whole lines
            sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--then-on", type=int, default=None, help="then again on this many ranks (0..M-1)")
    parser.add_argument("specs", nargs="+", help="MicroSpec JSON, one per benchmark")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", 0))
    ops = TorchOps(torch.device("cpu"))
    ops.open_group()
    try:
        _measure(args.specs, ops, rank)
        port = [free_port() if rank == 0 else None]
        if args.then_on:
            dist.broadcast_object_list(port, src=0)
    finally:
        ops.close_group()
    if args.then_on and rank < args.then_on:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], port[0], args.then_on, is_master=rank == 0)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=args.then_on)
        try:
            _measure(args.specs, ops, rank)
        finally:
            ops.close_group()


if __name__ == "__main__":
    main()

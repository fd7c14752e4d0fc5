"""Every collective micro-benchmark in one launch: ``python -m torch.distributed.run --nproc_per_node=N -m
tests.micro_ops_worker SPEC_JSON...``. Each spec runs through the worker's own ``figures`` with torch's
operations, in one process group, one after another, as ``python -m training.micro`` runs one (which the
CLI's micro cases launch); the test compares each op's records with nccl-tests' formulas."""
from __future__ import annotations

import json
import os
import sys

import torch

from training.contract import perflog
from training.micro.case import figures
from training.contract.micro import MicroSpec
from training.micro.torch_ops import TorchOps


def main(specs: list[str]) -> None:
    rank = int(os.environ.get("RANK", 0))
    ops = TorchOps(torch.device("cpu"))
    ops.open_group()
    try:
        for text in specs:
            for record in figures(MicroSpec.model_validate(json.loads(text)), ops, rank):
                perflog.emit(record)
    finally:
        ops.close_group()


if __name__ == "__main__":
    main(sys.argv[1:])

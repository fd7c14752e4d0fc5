"""``python -m training.micro --bench gemm|membw|collective [...]``, one process per device (under torchrun
for several), with torch: measure, and print each figure as a perf record on stdout. (A case runs the same
benchmarks with its framework, torch or Paddle: training/micro/case.py.)"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from training.contract import names as contract, perflog
from training.micro.case import figures
from training.contract.micro import MicroSpec
from training.micro.torch_ops import TorchOps
from training.unsupported import UnsupportedOnDevice


def parse_spec(argv: list[str] | None = None) -> tuple[MicroSpec, str]:
    parser = argparse.ArgumentParser(prog="python -m training.micro", description=__doc__)
    parser.add_argument("--spec", required=True, help="the MicroSpec as JSON, e.g. '{\"bench\": \"gemm\"}'")
    parser.add_argument("--device", default="cpu", help="torch device type: cpu, cuda, xpu, npu, ...")
    args = parser.parse_args(argv)
    return MicroSpec.model_validate(json.loads(args.spec)), args.device


def main(argv: list[str] | None = None) -> None:
    spec, device_type = parse_spec(argv)
    ranks = contract.read_ranks("torch")
    rank, local = ranks.rank, ranks.local_rank
    device = torch.device(device_type) if device_type == "cpu" else torch.device(device_type, local)
    if device.type != "cpu":
        torch.accelerator.set_device_index(local)
    ops = TorchOps(device)
    grouped = spec.bench == "collective"  # GEMM and memory figures are per device: no group needed
    if grouped:
        ops.open_group()
    try:
        for record in figures(spec, ops, rank):
            perflog.emit(record)
    except UnsupportedOnDevice as exc:  # as a training round: ``unsupported``, not ``failed``
        perflog.emit(perflog.UnsupportedRecord(rank=rank, reason=str(exc)))
        print(f"accelbench: not supported on this device: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(contract.EXIT_UNSUPPORTED) from None
    finally:
        if grouped:
            ops.close_group()


if __name__ == "__main__":
    main()

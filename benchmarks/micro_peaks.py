#!/usr/bin/env python3
"""This machine's measured peaks: GEMM TFLOP/s per size, STREAM copy/triad GB/s, and collective bus bandwidth
per message size over ``--nprocs`` processes (gloo on a CPU), each through the worker's own micro-benchmarks
(``python -m training.micro``, under torchrun for the collective) and printed as Markdown tables for
docs/benchmarks.md.

    python benchmarks/micro_peaks.py [--device cpu] [--nprocs 2] [--op allreduce] [--iters 10]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.contract import perflog  # noqa: E402

GEMM_SHAPES = [[512, 512, 512], [1024, 1024, 1024], [2048, 2048, 2048], [4096, 4096, 4096], [2048, 3072, 768]]
STREAM_BYTES = [64 << 20, 256 << 20]
MESSAGE_BYTES = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24, 1 << 26, 1 << 28]


def measure(spec: dict, device: str, nprocs: int = 1) -> list[perflog.FigureRecord]:
    argv = ["-m", "training.micro", "--spec", json.dumps(spec), "--device", device]
    if nprocs > 1:
        argv = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nprocs}", *argv]
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, check=True)
    records = [r for r in map(perflog.parse_line, done.stdout.splitlines()) if isinstance(r, perflog.FigureRecord)]
    return [r for r in records if r.rank == 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--op", default="allreduce")
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()

    gemm = measure({"bench": "gemm", "dtypes": [args.dtype], "shapes": GEMM_SHAPES, "iters": args.iters}, args.device)
    print(f"| M x N x K | {args.dtype} TFLOP/s |\n| --- | ---: |")
    for r in gemm:
        if r.name == "gemm.tflops":
            print(f"| {r.params['m']}x{r.params['n']}x{r.params['k']} | {r.value:.4g} |")
    stream = measure({"bench": "membw", "sizes_bytes": STREAM_BYTES, "iters": args.iters}, args.device)
    print("\n| bytes per array | figure | GB/s |\n| ---: | --- | ---: |")
    for r in stream:
        if r.name.endswith("_gbps"):
            print(f"| {r.params['bytes'] >> 20} MiB | {r.name} | {r.value:.4g} |")
    coll = measure({"bench": "collective", "op": args.op, "sizes_bytes": MESSAGE_BYTES, "iters": args.iters},
                   args.device, args.nprocs)
    rows: dict[int, dict[str, float]] = {}
    for r in coll:
        rows.setdefault(r.params["bytes"], {})[r.name.split(".")[1]] = r.value
    print(f"\n| bytes | time (us) | algbw GB/s | busbw GB/s |  ({args.op}, {args.nprocs} processes)\n"
          "| ---: | ---: | ---: | ---: |")
    for nbytes, row in sorted(rows.items()):
        print(f"| {nbytes} | {row['time_s'] * 1e6:.1f} | {row['algbw_gbps']:.4g} | {row['busbw_gbps']:.4g} |")


if __name__ == "__main__":
    main()

"""GEMM throughput: TFLOP/s of one (M x K) @ (K x N) product per size and precision, and the best.
Framework-free: the product comes from the framework's ``MicroOps.gemm``."""
from __future__ import annotations

from typing import Iterator

from training.contract import flops, perflog
from training.micro.formulas import GEMM_FORMULA, gemm_flops
from training.micro.ops import MicroOps
from training.contract.micro import MicroSpec
from training.micro.timing import average_seconds


def run(spec: MicroSpec, ops: MicroOps, rank: int) -> Iterator[perflog.FigureRecord]:
    for dtype in spec.dtypes:
        best = None
        with ops.matmul_precision(dtype):
            for m, n, k in spec.shapes:
                call = ops.gemm(m, n, k, dtype, spec.seed)
                inputs = ops.inputs_of(call)
                seconds = average_seconds(call, spec.warmup, spec.iters, ops.synchronize)
                tflops = flops.tflop_per_s(gemm_flops(m, n, k), seconds)
                params = {"m": m, "n": n, "k": k, "dtype": dtype, "inputs": inputs, "seed": spec.seed}
                yield perflog.FigureRecord(rank=rank, name="gemm.time_s", value=seconds, unit="s", better="lower",
                                           params=params, formula=f"mean of {spec.iters} after {spec.warmup} warm-up")
                yield perflog.FigureRecord(rank=rank, name="gemm.tflops", value=tflops, unit="TFLOP/s",
                                           params=params, formula=GEMM_FORMULA)
                best = tflops if best is None else max(best, tflops)
        yield perflog.FigureRecord(rank=rank, name="gemm.best_tflops", value=best, unit="TFLOP/s",
                                   params={"dtype": dtype}, formula=f"the highest over the sizes; {GEMM_FORMULA}")

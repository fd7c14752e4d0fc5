"""GEMM throughput: TFLOP/s of one (M x K) @ (K x N) product per size and precision, and the best."""
from __future__ import annotations

from typing import Callable, Iterator

import torch

from training import perflog
from training.micro.formulas import GEMM_FORMULA, gemm_flops
from training.micro.spec import MicroSpec
from training.micro.timing import average_seconds, synchronizer
from training.unsupported import UnsupportedOnDevice

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_gemm(m: int, n: int, k: int, dtype: str, device: torch.device) -> Callable[[], torch.Tensor]:
    """The product the benchmark times, its operands allocated once (so allocation is not timed)."""
    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # _scaled_mm: column-major B
        scale = torch.ones((), device=device)

        def fp8_product() -> torch.Tensor:
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        try:  # whether the device has fp8 units is the device's to say: ask it once, untimed
            fp8_product()
        except (RuntimeError, NotImplementedError) as exc:
            raise UnsupportedOnDevice(f"fp8 GEMM (torch._scaled_mm) does not run on {device.type}: {exc}") from None
        return fp8_product
    if dtype == "tf32" and (device.type == "cpu" or not torch.backends.cuda.is_built()):
        raise UnsupportedOnDevice(f"tf32 is a tensor-core mode of torch's CUDA backend; {device.type} has none")
    a = torch.randn(m, k, device=device, dtype=_DTYPES[dtype])
    b = torch.randn(k, n, device=device, dtype=_DTYPES[dtype])
    out = torch.empty(m, n, device=device, dtype=_DTYPES[dtype])
    return lambda: torch.matmul(a, b, out=out)


def _precision(dtype: str) -> str:
    # fp32 means full fp32 on tensor-core devices too: tf32 is its own row
    return "high" if dtype == "tf32" else "highest"


def run(spec: MicroSpec, device: torch.device, rank: int) -> Iterator[perflog.FigureRecord]:
    sync = synchronizer(device)
    for dtype in spec.dtypes:
        torch.set_float32_matmul_precision(_precision(dtype))
        best = None
        for m, n, k in spec.shapes:
            seconds = average_seconds(make_gemm(m, n, k, dtype, device), spec.warmup, spec.iters, sync)
            tflops = gemm_flops(m, n, k) / seconds / 1e12
            params = {"m": m, "n": n, "k": k, "dtype": dtype}
            yield perflog.FigureRecord(rank=rank, name="gemm.time_s", value=seconds, unit="s", better="lower",
                                       params=params, formula=f"mean of {spec.iters} after {spec.warmup} warm-up")
            yield perflog.FigureRecord(rank=rank, name="gemm.tflops", value=tflops, unit="TFLOP/s",
                                       params=params, formula=GEMM_FORMULA)
            best = tflops if best is None else max(best, tflops)
        yield perflog.FigureRecord(rank=rank, name="gemm.best_tflops", value=best, unit="TFLOP/s",
                                   params={"dtype": dtype}, formula=f"the highest over the sizes; {GEMM_FORMULA}")
    torch.set_float32_matmul_precision("highest")

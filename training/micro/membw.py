"""Memory bandwidth, STREAM style: copy (b = a) and triad (a = b + s*c) over arrays far larger than caches;
with a device also host-to-device and device-to-host copies and the launch latency of a tiny kernel.
Framework-free: the kernels come from the framework's ``MicroOps.stream``."""
from __future__ import annotations

from typing import Iterator

from training.contract import perflog
from training.micro.formulas import STREAM_BYTES_PER_ELEMENT
from training.micro.ops import MicroOps
from training.contract.micro import MicroSpec
from training.micro.timing import average_seconds

_STREAM_FORMULA = "GB/s = {n} x bytes per array / time / 1e9 (each array read or written once, as STREAM counts)"


def _figure(rank: int, name: str, value: float, unit: str, nbytes: int, formula: str, inputs: tuple[str, int],
            better: str = "higher") -> perflog.FigureRecord:
    """``inputs``: (what the kernel's operands were, MicroOps.inputs_of; the seed they were drawn from)."""
    return perflog.FigureRecord(rank=rank, name=name, value=value, unit=unit, better=better,
                                params={"bytes": nbytes, "dtype": "fp32", "inputs": inputs[0], "seed": inputs[1]},
                                formula=formula)


def run(spec: MicroSpec, ops: MicroOps, rank: int) -> Iterator[perflog.FigureRecord]:
    for nbytes in spec.sizes_bytes:
        n = nbytes // 4
        kernels = ops.stream(n, spec.seed)
        for name in ("copy", "triad"):
            moved = STREAM_BYTES_PER_ELEMENT[name] * n * 4
            inputs = (ops.inputs_of(kernels[name]), spec.seed)  # before it runs (triad: after copy filled b)
            seconds = average_seconds(kernels[name], spec.warmup, spec.iters, ops.synchronize)
            yield _figure(rank, f"membw.{name}_time_s", seconds, "s", n * 4,
                          f"mean of {spec.iters} after {spec.warmup} warm-up", inputs, better="lower")
            yield _figure(rank, f"membw.{name}_gbps", moved / seconds / 1e9, "GB/s", n * 4,
                          _STREAM_FORMULA.format(n=STREAM_BYTES_PER_ELEMENT[name]), inputs)
        for name in ("h2d", "d2h"):
            if name in kernels:
                inputs = (ops.inputs_of(kernels[name]), spec.seed)
                seconds = average_seconds(kernels[name], spec.warmup, spec.iters, ops.synchronize)
                yield _figure(rank, f"membw.{name}_gbps", n * 4 / seconds / 1e9, "GB/s", n * 4,
                              "GB/s = bytes / time / 1e9, pinned host memory", inputs)
        del kernels  # the arrays, before the next size's
    if not ops.on_cpu:
        seconds = average_seconds(ops.tiny_kernel(), spec.warmup, max(spec.iters, 1000), ops.synchronize)
        yield perflog.FigureRecord(rank=rank, name="launch.latency_us", value=seconds * 1e6, unit="us",
                                   better="lower", formula="time of back-to-back one-element kernels / count")

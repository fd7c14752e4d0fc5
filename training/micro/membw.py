"""Memory bandwidth, STREAM style: copy (b = a) and triad (a = b + s*c) over arrays far larger than caches;
with a device also host-to-device and device-to-host copies and the launch latency of a tiny kernel."""
from __future__ import annotations

from typing import Iterator

import torch

from training import perflog
from training.micro.formulas import STREAM_BYTES_PER_ELEMENT
from training.micro.spec import MicroSpec
from training.micro.timing import average_seconds, synchronizer

_STREAM_FORMULA = "GB/s = {n} x bytes per array / time / 1e9 (each array read or written once, as STREAM counts)"


def _figure(rank: int, name: str, value: float, unit: str, nbytes: int, formula: str,
            better: str = "higher") -> perflog.FigureRecord:
    return perflog.FigureRecord(rank=rank, name=name, value=value, unit=unit, better=better,
                                params={"bytes": nbytes, "dtype": "fp32"}, formula=formula)


def run(spec: MicroSpec, device: torch.device, rank: int) -> Iterator[perflog.FigureRecord]:
    sync = synchronizer(device)
    for nbytes in spec.sizes_bytes:
        n = nbytes // 4
        a = torch.ones(n, device=device)
        b, c = torch.empty_like(a), torch.full_like(a, 2.0)
        kernels = {"copy": lambda: b.copy_(a), "triad": lambda: torch.add(b, c, alpha=3.0, out=a)}
        for name, kernel in kernels.items():
            moved = STREAM_BYTES_PER_ELEMENT[name] * n * 4
            seconds = average_seconds(kernel, spec.warmup, spec.iters, sync)
            yield _figure(rank, f"membw.{name}_time_s", seconds, "s", n * 4,
                          f"mean of {spec.iters} after {spec.warmup} warm-up", better="lower")
            yield _figure(rank, f"membw.{name}_gbps", moved / seconds / 1e9, "GB/s", n * 4,
                          _STREAM_FORMULA.format(n=STREAM_BYTES_PER_ELEMENT[name]))
        if device.type != "cpu":
            host = torch.ones(n, pin_memory=True)
            for name, fn in (("h2d", lambda: a.copy_(host, non_blocking=True)),
                             ("d2h", lambda: host.copy_(a, non_blocking=True))):
                seconds = average_seconds(fn, spec.warmup, spec.iters, sync)
                yield _figure(rank, f"membw.{name}_gbps", n * 4 / seconds / 1e9, "GB/s", n * 4,
                              "GB/s = bytes / time / 1e9, pinned host memory")
        del a, b, c
    if device.type != "cpu":
        one = torch.zeros(1, device=device)
        seconds = average_seconds(lambda: one.add_(1), spec.warmup, max(spec.iters, 1000), sync)
        yield perflog.FigureRecord(rank=rank, name="launch.latency_us", value=seconds * 1e6, unit="us",
                                   better="lower", formula="time of back-to-back one-element kernels / count")

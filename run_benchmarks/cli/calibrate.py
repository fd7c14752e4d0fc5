"""``accelbench calibrate HARDWARE``: run the GEMM micro-benchmark on this machine's device of that hardware
and record the best TFLOP/s per dtype in the vendor's measured_peaks.yaml, which MFU is then also shown against.

The benchmark is the worker's own (``python -m training.micro``, the code micro-benchmark cases run), started
here as one process on one device: a peak is a per-device figure.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from training.contract import perflog

from run_benchmarks.catalog import measured_peaks
from run_benchmarks.errors import UserError
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.planner.inputs import default_root
from run_benchmarks.plan import Paths
from run_benchmarks.catalog.vendors import DTYPES, Hardware, VendorRegistry

# Square sizes and GPT-shaped ones (tokens x 3*d, tokens x 4*d): the peak is the best over them.
CPU_SHAPES = ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (2048, 3072, 768))
DEVICE_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 12288, 4096))


def default_dtypes(hardware: Hardware) -> list[str]:
    if hardware.on_cpu:
        return ["fp32"]
    declared = [d for d in DTYPES if d in hardware.spec.peak_tflops]
    return declared or ["fp32"]


def worker_argv(hardware: Hardware, dtypes: list[str], iters: int) -> list[str]:
    shapes = CPU_SHAPES if hardware.on_cpu else DEVICE_SHAPES
    spec = {"bench": "gemm", "dtypes": dtypes, "shapes": shapes, "warmup": 3, "iters": iters}
    return [sys.executable, "-m", "training.micro", "--spec", json.dumps(spec, separators=(",", ":")),
            "--device", hardware.kind.torch_device]


CODE_ROOT = Path(perflog.__file__).resolve().parents[2]  # the root whose training/ this accelbench ships


def measure(argv: list[str]) -> list[perflog.FigureRecord]:
    env = {**os.environ, "PYTHONPATH": str(CODE_ROOT)}
    done = subprocess.run(argv, cwd=CODE_ROOT, env=env, capture_output=True, text=True, check=False)
    records = [r for r in map(perflog.parse_line, done.stdout.splitlines()) if isinstance(r, perflog.FigureRecord)]
    unsupported = [r for r in map(perflog.parse_line, done.stdout.splitlines())
                   if isinstance(r, perflog.UnsupportedRecord)]
    if done.returncode != 0 or not records:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        why = unsupported[0].reason if unsupported else tail
        raise RuntimeError(f"the GEMM benchmark exited with {done.returncode}: {why}")
    return records


def best_per_dtype(records: list[perflog.FigureRecord]) -> dict[str, perflog.FigureRecord]:
    best: dict[str, perflog.FigureRecord] = {}
    for r in records:
        if r.name == "gemm.tflops":
            dtype = r.params["dtype"]
            if dtype not in best or r.value > best[dtype].value:
                best[dtype] = r
    return best


# A 1-minute load average past this share of the logical CPUs, before the benchmark starts, is other work on
# the machine: a GEMM sharing cores (or a device) with it reads low.
LOAD_LIMIT = 0.25


def machine_load() -> tuple[float, int, list[str]]:
    """(1-minute load average, logical CPUs, what else runs here): other runs' workers, as ``run`` warns of
    them (backends/cleanup.py), and a load average past ``LOAD_LIMIT`` of the CPUs."""
    from run_benchmarks.backends import cleanup
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.catalog.config_files import HostSpec

    host = connect(HostSpec(name="localhost", backend="local"))
    try:
        found = cleanup.leftover_warnings({"localhost": host})
    finally:
        host.close()
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > max(1.0, LOAD_LIMIT * cores):
        found.append(f"load average {load:.1f} on {cores} logical CPUs before the benchmark started "
                     f"(over {LOAD_LIMIT:.0%} of them): other work shares this machine")
    return load, cores, found


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    if args.iters < 1:
        raise UserError(f"--iters {args.iters}: needs at least 1 timed iteration", "e.g. --iters 10")
    root = (args.root or default_root()).resolve()
    hardware = VendorRegistry(Paths(root).vendors_dir).find_hardware(args.hardware)
    argv = worker_argv(hardware, args.dtypes or default_dtypes(hardware), args.iters)
    console.print(f"measuring GEMM peaks of {hardware.name}: {shlex.join(argv)}", markup=False, soft_wrap=True)
    load, cores, under_load = machine_load()
    for line in under_load:  # recorded with each peak too, and named wherever MFU (measured) is shown
        console.print(f"[yellow]warning[/] {escape(line)}: the peak may read low, and every MFU (measured) "
                      "against it high; calibrate again on an idle machine", soft_wrap=True)
    try:
        best = best_per_dtype(measure(argv))
    except RuntimeError as exc:
        console.print(f"[red]calibration failed[/]: {exc}", soft_wrap=True)
        return EXIT_FAILED
    peaks = measured_peaks.load(hardware.vendor_dir)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    own = dict(peaks.accelerators.get(hardware.name, {}))
    for dtype, record in best.items():
        p = record.params
        own[dtype] = measured_peaks.MeasuredPeak(tflops=record.value, shape=(p["m"], p["n"], p["k"]),
                                                 measured_at=when, host=platform.node(),
                                                 command=f"accelbench calibrate {hardware.name} --dtype {dtype}",
                                                 load_average_1m=round(load, 2), cpu_count=cores, under_load=under_load)
        datasheet = hardware.spec.peak_tflops.get(dtype)
        versus = f" (datasheet {datasheet:g}: {record.value / datasheet:.1%})" if datasheet else " (no datasheet peak)"
        console.print(f"  {dtype}: {record.value:.4g} TFLOP/s at {p['m']}x{p['n']}x{p['k']}{versus}", markup=False)
    path = measured_peaks.save(hardware.vendor_dir,
                               peaks.model_copy(update={"accelerators": {**peaks.accelerators, hardware.name: own}}))
    console.print(f"wrote {path}", markup=False)
    return EXIT_OK

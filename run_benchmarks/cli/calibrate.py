"""``accelbench calibrate HARDWARE``: run the GEMM micro-benchmark on this machine's device of that hardware
and record the best TFLOP/s per dtype in the vendor's measured_peaks.yaml, which MFU is then also shown against.

The benchmark is the worker's own (``python -m training.micro``, the code micro-benchmark cases run), started
here as one process on one device: a peak is a per-device figure. The contention over it is measured as over a
round's steps (others' CPU, steal, memory pressure against test_conf's ``contention:`` limits): a peak measured
under contention is stored marked as such, and every MFU against it says so.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.markup import escape

from training.contract import perflog
from training.contract.names import ENV_RUN_ID

from run_benchmarks.catalog import measured_peaks
from run_benchmarks.errors import UserError
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.planner.inputs import default_root, load_inputs
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


def measure(argv: list[str], env: Optional[dict] = None) -> list[perflog.FigureRecord]:
    env = env or {**os.environ, "PYTHONPATH": str(CODE_ROOT)}
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


def machine_load() -> tuple[float, int, list[str]]:
    """(1-minute load average, logical CPUs, other runs' workers here, a short line each without pids): warned
    of; the peak is marked by the contention measured during the benchmark (``beside``), which counts their
    CPU as any other process's."""
    from run_benchmarks.backends import cleanup
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.catalog.config_files import HostSpec

    host = connect(HostSpec(name="localhost", backend="local"))
    try:
        found = cleanup.leftover_warnings({"localhost": host})
    finally:
        host.close()
    return os.getloadavg()[0], os.cpu_count() or 1, found


def beside(argv: list[str], limits) -> tuple[list[perflog.FigureRecord], dict, list[str]]:
    """``measure(argv)`` with the node monitor's contention counters read around it (``python -m
    training.monitor.quiet --until-eof``): (records, figures, reasons past ``limits``). The benchmark carries the
    probe's run id, so its CPU is the calibration's own; everything else on the cores is contention."""
    from run_benchmarks.backends.hosts.guard import orchestrator_tag
    from run_benchmarks.execute.contention import figures_between
    from run_benchmarks.results.figures.contention import reasons

    env = {**os.environ, "PYTHONPATH": str(CODE_ROOT), ENV_RUN_ID: f"calibrate-{os.getpid()}-{time.time_ns()}"}
    probe = subprocess.Popen([sys.executable, "-m", "training.monitor.quiet", "--until-eof", "--orchestrator",
                              orchestrator_tag()], cwd=CODE_ROOT, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        probe.stdout.readline()  # "ready": its baseline is taken
        records = measure(argv, env)
    finally:
        out, _ = probe.communicate(timeout=30)
    try:
        first, last = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return records, {"measured": False, "why": "the contention probe printed nothing"}, []
    figures = figures_between(first, last, [first["contention"], last["contention"]], "the GEMM benchmark",
                              own_needed=False)  # the benchmark is this machine's own process: always seen
    return records, figures, reasons(figures, limits)


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    if args.iters < 1:
        raise UserError(f"--iters {args.iters}: needs at least 1 timed iteration", "e.g. --iters 10")
    root = (args.root or default_root()).resolve()
    hardware = VendorRegistry(Paths(root).vendors_dir).find_hardware(args.hardware)
    argv = worker_argv(hardware, args.dtypes or default_dtypes(hardware), args.iters)
    console.print(f"measuring GEMM peaks of {hardware.name}: {shlex.join(argv)}", markup=False, soft_wrap=True)
    load, cores, leftovers = machine_load()
    for line in leftovers:  # a live run's CPU is measured below; a dead one's workers may still hold a device
        console.print(f"[yellow]warning[/] {escape(line)}", soft_wrap=True)
    limits = load_inputs(root, args.test_conf).test_conf.contention
    try:
        records, figures, under_load = beside(argv, limits)
        best = best_per_dtype(records)
    except RuntimeError as exc:
        console.print(f"[red]calibration failed[/]: {escape(str(exc))}", soft_wrap=True)
        return EXIT_FAILED
    for line in under_load:  # recorded with each peak too, and named wherever MFU (measured) is shown
        console.print(f"[yellow]warning[/] contended: {escape(line)}: the peak may read low, and every MFU "
                      "(measured) against it high; calibrate again on a quiet machine", soft_wrap=True)
    peaks = measured_peaks.load(hardware.vendor_dir)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    own = dict(peaks.accelerators.get(hardware.name, {}))
    for dtype, record in best.items():
        p = record.params
        own[dtype] = measured_peaks.MeasuredPeak(tflops=record.value, shape=(p["m"], p["n"], p["k"]),
                                                 measured_at=when, host=platform.node(),
                                                 command=f"accelbench calibrate {hardware.name} --dtype {dtype}",
                                                 load_average_1m=round(load, 2), cpu_count=cores, under_load=under_load,
                                                 contention={k: figures.get(k) for k in measured_peaks.CONTENTION})
        datasheet = hardware.spec.peak_tflops.get(dtype)
        versus = f" (datasheet {datasheet:g}: {record.value / datasheet:.1%})" if datasheet else " (no datasheet peak)"
        console.print(f"  {dtype}: {record.value:.4g} TFLOP/s at {p['m']}x{p['n']}x{p['k']}{versus}", markup=False)
    path = measured_peaks.save(hardware.vendor_dir,
                               peaks.model_copy(update={"accelerators": {**peaks.accelerators, hardware.name: own}}))
    console.print(f"wrote {path}", markup=False)
    return EXIT_OK

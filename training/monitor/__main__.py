"""``python -m training.monitor --config CONFIG --out DIR``: sample until SIGTERM (or --duration).

The accelerator monitor is the one the worker config's accelerator kind names (``--accelerator NAME``
picks a built-in one by hand instead).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from training.contract.names import MONITOR_ACCELERATOR_FILE, MONITOR_HOST_FILE, MONITOR_SCHEMA, MONITOR_STATUS_FILE

from training.contract import readings
from training.monitor import ToolKilled, Unavailable, describe, opener

FILES = {"host": MONITOR_HOST_FILE, "accelerator": MONITOR_ACCELERATOR_FILE}
# A sampler tool killed by a signal: how long the monitor waits for its own SIGTERM before it counts the kill
# as the sampler's end (a node's stop signals its whole tree, and the tool can be reached first).
STOP_SIGNAL_WAIT_S = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.monitor")
    parser.add_argument("--config", type=Path, help="the round's worker config: its accelerator kind's monitor runs")
    parser.add_argument("--accelerator", default="none", help="without --config: nvml, rocm-smi, cpu or none")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--duration", type=float, help="stop after this many seconds (default: at SIGTERM)")
    parser.add_argument("--out", type=Path, required=True, help="folder for host.jsonl, accelerator.jsonl")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    # Whoever started us (the orchestrator, or its SSH watchdog) died when we are re-parented: stop too,
    # within an interval. As PID 1 of a container (no parent here) the container's removal ends us.
    parent = os.getppid()
    orphaned = (lambda: os.getppid() != parent) if parent > 1 else (lambda: False)
    accelerator = args.accelerator
    if args.config is not None:
        from training.contract.spec import WorkerConfig

        accelerator = WorkerConfig.model_validate_json(args.config.read_text(encoding="utf-8")).runtime.device.monitor
    samplers, status = {}, {"schema": MONITOR_SCHEMA, "interval_s": args.interval}
    for name, kind in (("host", "host"), ("accelerator", accelerator)):
        if kind == "none":
            status[name] = "off"
            continue
        try:
            samplers[name] = opener(kind)()
            status[name] = f"ok ({describe(kind)})"
        except Unavailable as exc:
            status[name] = f"unavailable ({describe(kind)}): {exc}"
    status_file = args.out / MONITOR_STATUS_FILE
    status_file.write_text(json.dumps(status) + "\n")
    files = {name: open(args.out / FILES[name], "a", encoding="utf-8", buffering=1) for name in samplers}
    started = time.monotonic()
    next_at = started
    while not stopping and not orphaned() and samplers and \
            (args.duration is None or time.monotonic() - started < args.duration):
        now = time.time()
        for name, sampler in list(samplers.items()):
            try:
                sample = sampler.sample()
                if name == "accelerator":
                    sample = readings.check(sample)  # impossible readings: refused, named for a warning
                files[name].write(json.dumps({"t": round(now, 3), **sample}) + "\n")
            except Unavailable as exc:  # e.g. the device went away: stop this sampler, keep the others
                if isinstance(exc, ToolKilled):  # the node's stop may have reached the tool before us
                    _wait_for(lambda: bool(stopping), STOP_SIGNAL_WAIT_S)
                if stopping:  # the stop reached the sampler's tool too (the node's whole tree is signalled)
                    break
                status[name] = f"stopped: {exc}"
                del samplers[name]
                status_file.write_text(json.dumps(status) + "\n")
        next_at += args.interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    for f in files.values():
        f.close()
    return 0


def _wait_for(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())

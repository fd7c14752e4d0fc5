"""``python -m training.monitor --config CONFIG --out DIR``: sample until SIGTERM (or --duration).

The accelerator monitor is the one the worker config's accelerator kind names (``--accelerator NAME``
picks a built-in one by hand instead).
"""
from __future__ import annotations

import argparse
import json
import os
import select
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
    stopping: list[bool] = []
    pause = _stop_signal(stopping)
    # Whoever started us (the orchestrator, or its SSH watchdog) died when we are re-parented: stop too,
    # within an interval. As PID 1 of a container (no parent here) the container's removal ends us.
    parent = os.getppid()
    orphaned = (lambda: os.getppid() != parent) if parent > 1 else (lambda: False)
    accelerator = args.accelerator if args.config is None else accelerator_of(args.config)
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
                    pause(time.monotonic() + STOP_SIGNAL_WAIT_S)
                if stopping:  # the stop reached the sampler's tool too (the node's whole tree is signalled)
                    break
                status[name] = f"stopped: {exc}"
                del samplers[name]
                status_file.write_text(json.dumps(status) + "\n")
        next_at += args.interval
        pause(next_at)
    for f in files.values():
        f.close()
    return 0


def accelerator_of(config: Path):
    """The accelerator monitor the worker config names. A built-in one is a name, read from the JSON as it is;
    only a vendor's command is validated through the contract's schema: pydantic and the spec module cost
    ~0.3 s of CPU, taken from the ranks that start beside the monitor."""
    monitor = json.loads(config.read_text(encoding="utf-8"))["runtime"]["device"].get("monitor", "none")
    if isinstance(monitor, str):
        return monitor
    from training.contract.spec import CommandMonitorSpec

    return CommandMonitorSpec.model_validate(monitor)


def _stop_signal(stopping: list[bool]):
    """SIGTERM appends to ``stopping`` and wakes ``pause(until)`` at once (a self-pipe, ``set_wakeup_fd``):
    a sleep would finish its interval first (PEP 475), and the round's stop would wait on it."""
    read, write = os.pipe()
    for fd in (read, write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(write)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    def pause(until: float) -> None:
        while not stopping and (left := until - time.monotonic()) > 0:
            if select.select([read], [], [], left)[0]:
                os.read(read, 512)  # another signal's byte: drained, and the wait goes on

    return pause


if __name__ == "__main__":
    sys.exit(main())

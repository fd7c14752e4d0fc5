#!/usr/bin/env python3
"""The sampling's cost inside one run (issue 41): the run's monitor paused and resumed in alternating blocks.

benchmarks/sampling_cost.py compares whole runs with the sampling on and off; on a shared 2-core machine two
runs of the same command differ by up to 10 %, so pairs of runs cannot show 1 %. Here one long ``accelbench
run`` trains while this script stops its monitor (SIGSTOP: it samples nothing and uses no CPU) and lets it go
on (SIGCONT) every ``--block-s`` seconds, on, off, on, off... Each measured step of rank 0 that lies wholly
inside a block counts for that block's side; a block's rate is its steps' tokens over their time. Adjacent
blocks (on, off) make a pair, so a drift of the machine over the run hits both sides of a pair alike; the
cost is the geometric mean of the pairs' rate ratios (with, over without) with its 95 % interval (t over the
pairs' log ratios). The monitor is running whenever the run starts or ends, so the run itself is unchanged.
Goal: tokens/s with sampling within 1 % of without.

    python benchmarks/sampling_paused.py [--steps 1500] [--block-s 3] [--case gpt2_tiny:torch:cpu:1:2]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
T975 = {5: 2.571, 10: 2.228, 20: 2.086, 30: 2.042, 60: 2.000}  # Student's t, 97.5 %, by degrees of freedom


def t975(dof: int) -> float:
    return next((t for d, t in sorted(T975.items()) if dof <= d), 1.96)


def monitor_of(orchestrator: psutil.Process) -> psutil.Process | None:
    for child in orchestrator.children(recursive=True):
        try:
            if "training.monitor" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            pass
    return None


def steps_of(log_root: Path, live: bool = False) -> list[dict]:
    """Rank 0's measured step records (their end time and length): while it runs, from torchrun's log of it."""
    records = []
    pattern = "*/*/round1/*/torchrun/*/attempt_*/0/stdout.log" if live else "*/*/round1/*/rank0.stdout.log"
    for path in log_root.glob(pattern):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("ACCELBENCH_PERF ") and '"kind":"step"' in line:
                record = json.loads(line.split(" ", 1)[1])
                if not record["warmup"]:
                    records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="gpt2_tiny:torch:cpu:1:2")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--block-s", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sampling_paused.") as tmp:
        log_root = Path(tmp) / "logs"
        argv = [sys.executable, "-m", "run_benchmarks.cli", "run", args.case, "--set", f"train.steps={args.steps}",
                "--set", "train.warmup_steps=10", "--log-root", str(log_root)]
        with open(Path(tmp) / "run.log", "w") as out:
            run = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
        orchestrator, monitor, blocks = psutil.Process(run.pid), None, []
        try:
            while run.poll() is None and (monitor is None or not steps_of(log_root, live=True)):
                monitor = monitor or monitor_of(orchestrator)
                time.sleep(0.2)
            paused = False
            while run.poll() is None and len(steps_of(log_root, live=True)) < args.steps - 10 - 20:
                started = time.time()
                time.sleep(args.block_s)
                blocks.append((started, time.time(), "off" if paused else "on"))
                paused = not paused
                monitor.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)
        finally:
            if monitor is not None and monitor.is_running():
                monitor.send_signal(signal.SIGCONT)
            code = run.wait()
        if code != 0:
            raise SystemExit(f"the run exited {code}: {(Path(tmp) / 'run.log').read_text()[-2000:]}")
        steps = steps_of(log_root)
    rates = []
    for start, end, side in blocks:
        inside = [s for s in steps if s["ended_at"] - s["step_time_s"] >= start and s["ended_at"] <= end]
        if inside:
            rates.append((side, sum(s["tokens"] for s in inside) / sum(s["step_time_s"] for s in inside), len(inside)))
    logs = [math.log(a[1] / b[1]) for a, b in zip(rates[::2], rates[1::2]) if a[0] == "on" and b[0] == "off"]
    if len(logs) < 3:
        raise SystemExit(f"only {len(logs)} pairs of blocks ({len(blocks)} blocks, {len(steps)} steps): give more "
                         "--steps")
    mean, half = statistics.fmean(logs), t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    print(f"{args.case}, {args.steps} steps, blocks of {args.block_s:g} s: {len(logs)} pairs (on, off), "
          f"{statistics.median(r[2] for r in rates):.0f} steps a block; load average at the end "
          f"{os.getloadavg()[0]:.2f}")
    print(f"tokens/s with the monitor sampling / paused: {math.exp(mean):.4f} (95 % interval "
          f"{math.exp(mean - half):.4f}-{math.exp(mean + half):.4f}); goal: within 1 % (0.99-1.01)")


if __name__ == "__main__":
    main()

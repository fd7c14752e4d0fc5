#!/usr/bin/env python3
"""What does a sweep cost between points? The time from one point's end to the next point's first step,
against a bare ``torchrun`` start of the same case (spawn -> first step). Goal: at most 1.2x.

(a) ``accelbench sweep CASE --grid train.seed=1,2,...`` runs points that differ only in the seed. A
    watcher polls the run folder every 10 ms and notes, per point, when its rank-0 log first shows the end
    record and when it first shows a step record; gap k = first step of point k+1 - end of point k. The gap
    holds everything the sweep does in between: noticing the exit, stopping, collecting and analysing the
    logs, writing results and the store, planning the next point, starting its launcher, Python, torch,
    the model and its first step.
(b) bare torchrun: ``python -m torch.distributed.run --standalone --nproc-per-node=N -m
    training.run_pretraining --config <the same worker config>`` run back to back, each in a session of
    its own (as torchrun starts workers; see harness_overhead.py on scheduler autogroups); its gap is
    measured the same way: end record of one run -> first step record of the next (the worker's teardown,
    torchrun's exit, the next start). Spawn -> first step is printed too.

The ratio is median(a) / median(b); the ratio to the bare spawn -> first step is printed beside it (it
leaves out the teardown every sequence of torchrun runs pays).

    python benchmarks/sweep_gap.py [--case gpt2_tiny:torch:cpu:1:1] [--points 5] [--bare 5] [--no-monitor]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP, END = '"kind":"step"', '"kind":"end"'


def watch(run_root: Path, seen: dict, stop: threading.Event) -> None:
    """Per point folder (p00-..., p01-...): monotonic time its logs first show a step, and the end record."""
    while not stop.is_set():
        for log in run_root.glob("*/p*/round1/**/*stdout.log"):
            point = next(part for part in log.parts if part.startswith("p") and part[1:3].isdigit())[:3]
            marks = seen.setdefault(point, {})
            if "step" in marks and "end" in marks:
                continue
            try:
                text = log.read_text(errors="replace")
            except OSError:
                continue
            now = time.monotonic()
            if STEP in text:
                marks.setdefault("step", now)
            if END in text:
                marks.setdefault("end", now)
        time.sleep(0.01)


def sweep_gaps(case: str, points: int, settings: list[str], work: Path, monitor: bool) -> tuple[list[float], Path]:
    run_root = work / "logs"
    seen: dict = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(run_root, seen, stop), daemon=True)
    watcher.start()
    seeds = ",".join(str(s) for s in range(1, points + 1))
    argv = [sys.executable, "-m", "run_benchmarks.cli", "sweep", case, "--grid", f"train.seed={seeds}",
            "--log-root", str(run_root), *[a for s in settings for a in ("--set", s)]]
    if not monitor:  # the host and accelerator sampler beside each node off (test_conf monitor_interval_s: 0)
        conf = work / "test_conf.yaml"
        conf.write_text("monitor_interval_s: 0\n", encoding="utf-8")
        argv += ["--test-conf", str(conf)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work)}
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, start_new_session=True)
    stop.set()
    watcher.join()
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    order = sorted(seen)
    gaps = [seen[b]["step"] - seen[a]["end"] for a, b in zip(order, order[1:])]
    config = next(run_root.glob("*/p00-*/round1/config.json"))
    return gaps, config


def bare_runs(config: Path, nprocs: int, work: Path, runs: int) -> tuple[list[float], list[float]]:
    """The same torchrun command run back to back: (gaps end record -> next first step, spawn -> first step)."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nprocs}",
            "-m", "training.run_pretraining", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work)}
    gaps, starts, last_end = [], [], None
    for _ in range(runs):
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        first = end = None
        for line in proc.stdout:
            if first is None and STEP in line:
                first = time.monotonic()
            if END in line:
                end = time.monotonic()
        proc.wait()
        if first is None or end is None or proc.returncode != 0:
            raise SystemExit(f"the bare torchrun run failed (exit {proc.returncode})")
        starts.append(first - started)
        if last_end is not None:
            gaps.append(first - last_end)
        last_end = end
    return gaps, starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="gpt2_tiny:torch:cpu:1:1")
    parser.add_argument("--points", type=int, default=5, help="sweep points (gaps: one fewer)")
    parser.add_argument("--bare", type=int, default=5, help="bare torchrun runs, back to back")
    parser.add_argument("--no-monitor", action="store_true", help="sweep with monitor_interval_s: 0")
    parser.add_argument("--set", dest="settings", action="append",
                        default=["train.steps=6", "train.warmup_steps=2"], metavar="KEY=VALUE")
    args = parser.parse_args()
    nprocs = int(args.case.split(":")[4])
    with tempfile.TemporaryDirectory(prefix="accelbench-sweep-gap-") as tmp:
        work = Path(tmp)
        gaps, config = sweep_gaps(args.case, args.points, args.settings, work, not args.no_monitor)
        bare_gaps, bare_starts = bare_runs(config, nprocs, work, args.bare)
    gap, bare_gap, start = statistics.median(gaps), statistics.median(bare_gaps), statistics.median(bare_starts)
    print(json.dumps({"case": args.case, "settings": args.settings, "monitor": not args.no_monitor,
                      "sweep_gaps_s": [round(g, 3) for g in gaps], "bare_gaps_s": [round(g, 3) for g in bare_gaps],
                      "bare_spawn_to_first_step_s": [round(b, 3) for b in bare_starts],
                      "median_sweep_gap_s": round(gap, 3), "median_bare_gap_s": round(bare_gap, 3),
                      "median_bare_spawn_to_first_step_s": round(start, 3),
                      "ratio_to_bare_gap": round(gap / bare_gap, 3), "ratio_to_bare_start": round(gap / start, 3),
                      "goal": "ratio_to_bare_gap <= 1.2"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How fast, and in how much memory, does accelbench turn rank logs into figures?

Writes ``--ranks`` rank logs that together hold ``--size-mb`` of perf records (start, one step
record per step, end: what a worker prints), then, in a fresh child process, times exactly what a
round's end does: collect.read_ranks (worker processes on every core once the logs pass
collect.PARALLEL_BYTES) folded rank by rank into analyze.RoundAccumulator, then the round's
metrics. Reports MB/s over the files' bytes and peak RSS (ru_maxrss) of the analysing process and
of its largest worker, beside the RSS of an idle process that imported the same modules.

Goal (issue 6): at least 100 MB/s with memory bounded by the step count, not by the log size.

    python benchmarks/analyze_scale.py [--size-mb 1024] [--ranks 8] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.contract import perflog  # noqa: E402


def write_rank(path: Path, rank: int, world: int, target_bytes: int) -> int:
    """One rank's log: realistic step records until ``target_bytes``; returns the step count."""
    start = perflog.StartRecord(rank=rank, local_rank=rank % 8, node_rank=rank // 8, world_size=world,
                                framework="torch", framework_version="2.13.0", device="cuda:0", precision="bf16",
                                n_params=6_700_000_000, flops_per_token=4.2e10, flop_formula="6N + 12LHQT",
                                tokens_per_step=16384)
    template = perflog.format_record(perflog.StepRecord(
        rank=rank, step=123456, warmup=False, step_time_s=0.123456789, tokens=16384, loss=6.123456,
        grad_norm=1.234567))
    head, tail = template.split('"step":123456', 1)
    before_time, after_time = tail.split("0.123456789", 1)
    chunks, size, step = [perflog.format_record(start) + "\n"], 0, 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(chunks[0])
        while size < target_bytes:
            lines = []
            for _ in range(10_000):
                warm = "true" if step < 10 else "false"
                line = (f'{head}"step":{step}{before_time.replace("false", warm)}'
                        f'{0.1 + (step * 7919 % 1000) * 1e-5 + rank * 1e-6:.9f}{after_time}\n')
                lines.append(line)
                step += 1
            block = "".join(lines)
            f.write(block)
            size += len(block)
        f.write(perflog.format_record(perflog.EndRecord(rank=rank, steps=step, peak_memory_bytes=60 * 2**30,
                                                        memory_total_bytes=80 * 2**30,
                                                        memory_kind="cuda_allocated")) + "\n")
    return step


ANALYZE = """
import json, resource, sys, time
from pathlib import Path
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.worker_logs.rank_logs import RankLogs
paths = [Path(p) for p in sys.argv[2:]]
if sys.argv[1] == "idle":
    print(json.dumps({"rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    sys.exit()
t0 = time.perf_counter()
acc = analyze.RoundAccumulator()
for log in collect.read_ranks([RankLogs(rank, path, path.with_suffix(".err")) for rank, path in enumerate(paths)]):
    acc.add(log)
    assert not log.problems, log.problems[:3]
    log.series = None  # what outcome.py does: the folded columns go
m = acc.metrics(989.5, "", samples_per_step=8 * len(paths))
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "worker_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "measured_steps": m.measured_steps, "tokens_per_s_per_device": m.tokens_per_s_per_device}))
"""


def child(mode: str, paths: list[Path]) -> dict:
    done = subprocess.run([sys.executable, "-c", ANALYZE, mode, *map(str, paths)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=1024, help="perf records in total, MB (default 1024)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="timed analyses (the median is reported)")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them (default: a temp dir)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="accelbench-analyze-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        per_rank = int(args.size_mb * 1e6 / args.ranks)
        t0 = time.perf_counter()
        paths, steps = [], 0
        for rank in range(args.ranks):
            path = folder / f"rank{rank}.stdout.log"
            steps = write_rank(path, rank, args.ranks, per_rank)
            paths.append(path)
        total = sum(p.stat().st_size for p in paths)
        print(f"wrote {args.ranks} rank logs, {total / 1e6:,.0f} MB, {steps:,} steps each, "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
        idle = child("idle", paths)
        runs = []
        for i in range(args.repeats):
            runs.append(child("analyze", paths))
            print(f"  run {i + 1}: {runs[-1]['seconds']:.2f} s, {total / 1e6 / runs[-1]['seconds']:.0f} MB/s, "
                  f"peak RSS {runs[-1]['rss_kib'] / 1024:.0f} MiB (largest worker "
                  f"{runs[-1]['worker_rss_kib'] / 1024:.0f} MiB)", flush=True)
        runs.sort(key=lambda r: r["seconds"])
        best = runs[len(runs) // 2]
        print(json.dumps({
            "bytes": total, "ranks": args.ranks, "steps_per_rank": steps,
            "median_seconds": round(best["seconds"], 3), "mb_per_s": round(total / 1e6 / best["seconds"], 1),
            "peak_rss_mib": round(max(r["rss_kib"] for r in runs) / 1024, 1),
            "worker_peak_rss_mib": round(max(r["worker_rss_kib"] for r in runs) / 1024, 1),
            "idle_rss_mib": round(idle["rss_kib"] / 1024, 1),
            "measured_steps": best["measured_steps"],
            "cpu": os.cpu_count(), "python": sys.version.split()[0],
        }, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())

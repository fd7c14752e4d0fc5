#!/usr/bin/env python3
"""The whole `accelbench run` beside a bare torchrun DDP loop with no accelbench code in it (issue 41).

(a) ``accelbench run gpt2_tiny:torch:cpu:1:N --set ...``: the whole command (plan, preflight, guards, the
    monitor, the workers with their records and time breakdown, collection, analysis, the store, the table),
    a fresh interpreter; tokens/s is ``metrics.tokens_per_s_total`` of its results.json;
(b) ``python -m torch.distributed.run --nproc-per-node N benchmarks/bare_ddp.py ...``: the same model, batch,
    optimizer and steps in plain torch (DDP over gloo for N > 1), started as a user would start it; tokens/s is
    the loop's own (every rank's tokens over the slowest rank's time after the warm-up).

Both sides start in a session of their own (torchrun's workers do anyway: run_vs_torchrun.py ``timed``); wall
time is from starting the command to its exit. For each size, pairs run interleaved with the order flipped
every pair (a b, b a, ...), so drift of a shared machine and any first-or-second effect hit both alike; the
ratios are of the medians. Goal (issue 41): wall(a)/wall(b) at most 1.05 at 1 and at 2 processes.

    python benchmarks/run_vs_bare_ddp.py                 # 5 pairs at 1 and at 2 processes, ~40-70 s a run
    python benchmarks/run_vs_bare_ddp.py --pairs 1 --sizes 2 --steps 10     # a smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pairs import interleaved, medians  # noqa: E402
from run_vs_torchrun import through_accelbench, timed  # noqa: E402

BARE = Path(__file__).resolve().parent / "bare_ddp.py"
# issue 41's workload: gpt2_tiny made a little bigger, so a step takes ~1 s on a 2-core machine
MODEL = {"n_layer": 4, "d_model": 256, "seq_len": 256}
MICRO_BATCH = 8


def accelbench(nprocs: int, steps: int, work: Path) -> dict:
    settings = [f"model.{k}={v}" for k, v in MODEL.items()] + [f"train.micro_batch_size={MICRO_BATCH}",
                                                               f"train.steps={steps}"]
    return through_accelbench(settings, work, False, case=f"gpt2_tiny:torch:cpu:1:{nprocs}")


def bare(nprocs: int, steps: int, warmup: int, work: Path) -> dict:
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nprocs}", str(BARE),
            *(f"--{k.replace('_', '-')}={v}" for k, v in MODEL.items()), f"--micro-batch-size={MICRO_BATCH}",
            f"--steps={steps}", f"--warmup-steps={warmup}"]
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of accelbench to import
    wall, _ = timed(argv, env, work / "b.log", False)
    line = next(line for line in (work / "b.log").read_text().splitlines() if line.startswith("{"))
    return {"wall_s": wall, "tokens_per_s": json.loads(line)["tokens_per_s_total"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2], help="processes (default: 1 2)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup-steps", type=int, default=5, help="the bare loop's (accelbench: the case's, 5)")
    args = parser.parse_args()
    if args.steps <= args.warmup_steps:
        raise SystemExit("--steps: give more than --warmup-steps")
    runs: dict[int, dict[str, list[dict]]] = {}

    def say(n: int, pair: int, run: dict) -> None:
        a, b = run["accelbench"], run["bare"]
        if a["warmup_steps"] != args.warmup_steps:
            raise SystemExit(f"accelbench ran {a['warmup_steps']} warm-up steps: give --warmup-steps "
                             f"{a['warmup_steps']}")
        print(f"{n} process(es), pair {pair}: accelbench {a['wall_s']:.2f} s {a['tokens_per_s']:,.0f} tok/s; bare DDP "
              f"{b['wall_s']:.2f} s {b['tokens_per_s']:,.0f} tok/s; wall ratio {a['wall_s'] / b['wall_s']:.3f}, tok/s "
              f"ratio {a['tokens_per_s'] / b['tokens_per_s']:.3f}", flush=True)

    with tempfile.TemporaryDirectory(prefix="run_vs_bare_ddp.") as tmp:
        for n in args.sizes:
            runs[n] = interleaved(args.pairs, {
                "accelbench": lambda pair, n=n: accelbench(n, args.steps, Path(tmp) / f"n{n}-pair{pair}"),
                "bare": lambda pair, n=n: bare(n, args.steps, args.warmup_steps, Path(tmp) / f"n{n}-pair{pair}")},
                lambda pair, run, n=n: say(n, pair, run))
    print(f"gpt2_tiny with {MODEL}, micro batch {MICRO_BATCH}, {args.steps} steps; {os.cpu_count()} CPU(s), "
          f"{args.pairs} pairs per size, load average at the end {os.getloadavg()[0]:.2f}")
    for n in args.sizes:
        wall, tps = medians(runs[n], "wall_s"), medians(runs[n], "tokens_per_s")
        print(f"{n} process(es): median wall accelbench {wall['accelbench']:.2f} s, bare DDP {wall['bare']:.2f} s, "
              f"ratio {wall['accelbench'] / wall['bare']:.3f} (goal <= 1.05); median tokens/s "
              f"{tps['accelbench']:,.0f} against {tps['bare']:,.0f}, ratio {tps['accelbench'] / tps['bare']:.3f}")

if __name__ == "__main__":
    main()

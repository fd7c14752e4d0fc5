#!/usr/bin/env python3
"""What the time breakdown costs: the same `accelbench run` with ``train.breakdown_steps=0`` and with the
default 3, in interleaved pairs (the order flipped every pair), tokens/s and wall time of each.

The breakdown steps run after the measured ones, so the goal (issue 33) is tokens/s within 1 % (ratio of the
medians); their wall cost is the extra steps. Each run is a fresh ``accelbench run`` (run_vs_torchrun.py's
``through_accelbench``), tokens/s from its results.json.

    python benchmarks/breakdown_cost.py [--pairs 5] [--set train.steps=150 ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_vs_torchrun import CASE, DEFAULT_SETTINGS, through_accelbench  # noqa: E402

SIDES = {"without": "train.breakdown_steps=0", "with": "train.breakdown_steps=3"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help=f"workload overrides for both sides (default: {' '.join(DEFAULT_SETTINGS)})")
    args = parser.parse_args()
    if args.pairs < 1:
        raise SystemExit("--pairs: give 1 or more")
    settings = list(args.settings or DEFAULT_SETTINGS)
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="breakdown_cost.") as tmp:
        for pair in range(1, args.pairs + 1):
            for side in (list(SIDES) if pair % 2 else list(reversed(SIDES))):
                runs[side].append(through_accelbench([*settings, SIDES[side]], Path(tmp) / f"{pair}{side}", False))
            w, b = runs["with"][-1], runs["without"][-1]
            print(f"pair {pair}: without {b['wall_s']:.2f} s {b['tokens_per_s']:,.0f} tok/s; with {w['wall_s']:.2f} s "
                  f"{w['tokens_per_s']:,.0f} tok/s; tok/s ratio {w['tokens_per_s'] / b['tokens_per_s']:.3f}", flush=True)
    tps = {side: statistics.median(r["tokens_per_s"] for r in runs[side]) for side in SIDES}
    wall = {side: statistics.median(r["wall_s"] for r in runs[side]) for side in SIDES}
    print(f"{CASE} with {' '.join(settings)}; {os.cpu_count()} CPU(s), {args.pairs} pairs, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"median tokens/s: with {tps['with']:,.0f}, without {tps['without']:,.0f}; ratio "
          f"{tps['with'] / tps['without']:.3f} (goal: within 1 %)")
    print(f"median wall: with {wall['with']:.2f} s, without {wall['without']:.2f} s (+{wall['with'] - wall['without']:.2f} s)")


if __name__ == "__main__":
    main()

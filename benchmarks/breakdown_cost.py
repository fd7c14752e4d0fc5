#!/usr/bin/env python3
"""What the time breakdown costs: the same `accelbench run` with ``train.breakdown_steps=0`` and with the
default 3, in interleaved pairs (the order flipped every pair), tokens/s and wall time of each.

The breakdown steps never fall in the measured window, so the goal (issue 33) is tokens/s within 1 % (ratio of
the medians). Their wall cost: none where they are the last warm-up steps (torch one process and DDP with a
warm-up long enough, issue 41: the default settings here), else the extra steps after the measured ones.
Each run is a fresh ``accelbench run`` (run_vs_torchrun.py's ``through_accelbench``), tokens/s from its
results.json.

    python benchmarks/breakdown_cost.py [--pairs 5] [--set train.steps=150 ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pairs import interleaved, say_with_without, summary_with_without  # noqa: E402
from run_vs_torchrun import CASE, DEFAULT_SETTINGS, through_accelbench  # noqa: E402

SIDES = {"without": "train.breakdown_steps=0", "with": "train.breakdown_steps=3"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help=f"workload overrides for both sides (default: {' '.join(DEFAULT_SETTINGS)})")
    args = parser.parse_args()
    settings = list(args.settings or DEFAULT_SETTINGS)
    with tempfile.TemporaryDirectory(prefix="breakdown_cost.") as tmp:
        runs = interleaved(args.pairs, {side: lambda pair, side=side: through_accelbench(
            [*settings, SIDES[side]], Path(tmp) / f"{pair}{side}", False) for side in SIDES}, say_with_without)
    print(f"{CASE} with {' '.join(settings)}; {os.cpu_count()} CPU(s), {args.pairs} pairs, load average "
          f"{os.getloadavg()[0]:.2f}")
    summary_with_without(runs)


if __name__ == "__main__":
    main()

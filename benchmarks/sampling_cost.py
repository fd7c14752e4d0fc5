#!/usr/bin/env python3
"""What the run's sampling costs: the same `accelbench run` with its sampling on (the defaults) and off, in
interleaved pairs (the order flipped every pair), tokens/s and wall time of each (issue 41).

Sampling is whatever a run does beside its ranks while they step: today the monitor beside every node (host
and accelerator samples every ``monitor_interval_s``, 1 s by default; 0 turns it off), and any other sampling a
switch turns off. The "without" side gets a test_conf with ``monitor_interval_s: 0`` and every ``--off-conf
KEY=VALUE`` (a test_conf key) and ``--off-set KEY=VALUE`` (a workload key, as ``--set``), so a sampler added
later is measured by naming its switch here; the "with" side runs the defaults. Each run is a fresh
``accelbench run`` (run_vs_torchrun.py ``through_accelbench``), tokens/s from its results.json. Goal: tokens/s
with sampling within 1 % of without (ratio of the medians).

    python benchmarks/sampling_cost.py [--pairs 5] [--set train.steps=150 ...] [--off-conf KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pairs import interleaved, say_with_without, summary_with_without  # noqa: E402
from run_vs_torchrun import CASE, DEFAULT_SETTINGS, through_accelbench  # noqa: E402

def off_conf(path: Path, assignments: list[str]) -> Path:
    """A test_conf with the sampling off: ``monitor_interval_s: 0`` and each ``KEY=VALUE`` (the value as YAML)."""
    conf: dict = {"monitor_interval_s": 0}
    for text in assignments:
        key, sep, value = text.partition("=")
        if not sep:
            raise SystemExit(f"--off-conf {text!r}: write KEY=VALUE, e.g. monitor_interval_s=0")
        conf[key.strip()] = yaml.safe_load(value)
    path.write_text(yaml.safe_dump(conf))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--case", default=CASE)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help=f"workload overrides for both sides (default: {' '.join(DEFAULT_SETTINGS)})")
    parser.add_argument("--off-conf", action="append", default=[], help="a test_conf KEY=VALUE of the side "
                        "without sampling, beside monitor_interval_s=0")
    parser.add_argument("--off-set", action="append", default=[], help="a workload KEY=VALUE of the side without "
                        "sampling")
    args = parser.parse_args()
    settings = list(args.settings or DEFAULT_SETTINGS)
    with tempfile.TemporaryDirectory(prefix="sampling_cost.") as tmp:
        conf = off_conf(Path(tmp) / "off.yaml", args.off_conf)
        sides = {"without": lambda pair: through_accelbench([*settings, *args.off_set], Path(tmp) / f"{pair}without",
                                                            False, case=args.case, options=("--test-conf", str(conf))),
                 "with": lambda pair: through_accelbench(settings, Path(tmp) / f"{pair}with", False, case=args.case)}
        runs = interleaved(args.pairs, sides, say_with_without)
    off = ", ".join(["monitor_interval_s=0", *args.off_conf, *args.off_set])
    print(f"{args.case} with {' '.join(settings)}; sampling off: {off}; {os.cpu_count()} CPU(s), {args.pairs} pairs, "
          f"load average {os.getloadavg()[0]:.2f}")
    summary_with_without(runs)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How often does ``accelbench history`` find a lasting shift, and how often does it see one that is not there?

Generates ``--series`` daily series with a lasting shift of ``--shift`` (half drops, half rises, at a random day
that leaves at least changes.MIN_SHIFT days on each side) and as many without one, each ``--min-days`` to
``--max-days`` long, with ``--noise`` (a relative standard deviation, normal on the log scale) between runs, each
point's own noise (what its rounds' stored intervals say) a third to four fifths of that, and in every other
series one bad day (12-20 % low, never next to the shift). Runs the detector (results/history/changes.py, as
``history`` runs it on stored points) on each and reports:

- recall: the share of shifted series with a change point within one day of the shift;
- false alarms: the share of series without a shift that report any change point;
- precision: the share of all change points reported (both sets) that sit within a day of a real shift;
- bad days named as outliers, and the mean error of the found shift's size.

Goal (issue 46): at 1 % noise, a lasting 5 % shift found in >= 95 % of series, and < 5 % of series without a
shift reporting one. tests/test_history_detection.py runs a smaller, fixed version of this.

    python benchmarks/history_changepoints.py [--series 300] [--noise 0.01] [--shift 0.05] [--seed 1]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from run_benchmarks.results.history import changes  # noqa: E402


def series(rng: random.Random, days: int, noise: float, shift: float, bad_day: bool):
    """(values, own noise per point, shift day or None, bad day or None)."""
    at = rng.randint(changes.MIN_SHIFT, days - changes.MIN_SHIFT) if shift else None
    bad = None
    if bad_day:
        bad = rng.choice([d for d in range(days) if at is None or abs(d - at) > 1])
    values, own = [], []
    for day in range(days):
        value = 1000.0 * math.exp(rng.gauss(0, noise))
        if at is not None and day >= at:
            value *= 1 + shift
        if day == bad:
            value *= 1 - rng.uniform(0.12, 0.20)
        values.append(value)
        own.append(noise * rng.uniform(0.33, 0.8))
    return values, own, at, bad


def measure(count: int, noise: float, shift: float, seed: int, min_days: int = 14, max_days: int = 60) -> dict:
    rng = random.Random(seed)
    found = false_alarms = reported = true_reported = bad_days = bad_named = 0
    size_errors = []
    began = time.perf_counter()
    for i in range(count):
        for shifted in (True, False):
            days = rng.randint(min_days, max_days)
            size = (shift if i % 2 else -shift) if shifted else 0.0
            values, own, at, bad = series(rng, days, noise, size, bad_day=i % 2 == 0)
            result = changes.find(values, own)
            near = [s for s in result.shifts if at is not None and abs(s.index - at) <= 1]
            reported += len(result.shifts)
            true_reported += len(near)
            if shifted:
                found += bool(near)
                if near:
                    size_errors.append(abs(near[0].size - size))
            else:
                false_alarms += bool(result.shifts)
            if bad is not None:
                bad_days += 1
                bad_named += any(o.index == bad for o in result.outliers)
    return {"series_each": count, "noise": noise, "shift": shift, "seed": seed, "days": [min_days, max_days],
            "recall": found / count, "false_alarm_rate": false_alarms / count,
            "precision": true_reported / reported if reported else None,
            "bad_days_named": bad_named / bad_days if bad_days else None,
            "mean_size_error": sum(size_errors) / len(size_errors) if size_errors else None,
            "seconds": round(time.perf_counter() - began, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=300, help="series with a shift, and as many without")
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--shift", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = measure(args.series, args.noise, args.shift, args.seed)
    print(json.dumps(result, indent=2))
    return 0 if args.noise != 0.01 or args.shift != 0.05 or (
        result["recall"] >= 0.95 and result["false_alarm_rate"] < 0.05) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Interleaved pairs, the house style of accelbench's own benchmarks: each side runs once per pair, the order
flipped every pair (a b, b a, ...), so drift of a shared machine and any first-or-second effect hit both sides
alike; results are compared as ratios of medians."""
from __future__ import annotations

import statistics
from typing import Callable


def interleaved(pairs: int, sides: dict[str, Callable[[int], dict]],
                after_pair: Callable[[int, dict[str, dict]], None]) -> dict[str, list[dict]]:
    """``sides[name](pair)`` for every side in each of ``pairs`` pairs, the order flipped every pair; after each
    pair ``after_pair(pair, {name: its run})`` (to print it). Every side's runs, in pair order."""
    if pairs < 1:
        raise SystemExit("--pairs: give 1 or more")
    names = list(sides)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for pair in range(1, pairs + 1):
        for name in (names if pair % 2 else names[::-1]):
            runs[name].append(sides[name](pair))
        after_pair(pair, {name: done[-1] for name, done in runs.items()})
    return runs


def medians(runs: dict[str, list[dict]], key: str) -> dict[str, float]:
    """Each side's median of ``key`` over its runs."""
    return {name: statistics.median(run[key] for run in done) for name, done in runs.items()}


def say_with_without(pair: int, run: dict[str, dict]) -> None:
    """A pair's line for a benchmark of a cost: the run ``without`` it and ``with`` it, wall and tokens/s."""
    w, b = run["with"], run["without"]
    print(f"pair {pair}: without {b['wall_s']:.2f} s {b['tokens_per_s']:,.0f} tok/s; with {w['wall_s']:.2f} s "
          f"{w['tokens_per_s']:,.0f} tok/s; tok/s ratio {w['tokens_per_s'] / b['tokens_per_s']:.3f}", flush=True)


def summary_with_without(runs: dict[str, list[dict]]) -> None:
    """The medians of a benchmark of a cost, and its goal: tokens/s with it within 1 % of without."""
    tps, wall = medians(runs, "tokens_per_s"), medians(runs, "wall_s")
    print(f"median tokens/s: with {tps['with']:,.0f}, without {tps['without']:,.0f}; ratio "
          f"{tps['with'] / tps['without']:.3f} (goal: within 1 %)")
    print(f"median wall: with {wall['with']:.2f} s, without {wall['without']:.2f} s "
          f"({wall['with'] - wall['without']:+.2f} s)")

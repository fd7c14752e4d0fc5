"""Task figures (perf records of kind ``figure``): per rank -> per round -> across rounds.

Training rounds are measured by their steps (figures/analyze.py). Tasks whose headline is something else (an RLHF
iteration's phases, a GEMM's TFLOP/s per size, a collective's bus bandwidth per message size) report named
figures; this module combines them without knowing what they mean. A figure is keyed by its name and its
``params`` (the point it was measured at); the ranks' values combine as the worker declared (``reduce``),
and rounds combine into a mean and spread like the headline figures.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from training.contract import perflog

from run_benchmarks.results.figures import derive
from run_benchmarks.results.worker_logs.rank_logs import RankLog


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    better: str  # higher | lower
    params: Optional[dict] = None
    formula: Optional[str] = None
    ranks: int = 1  # how many ranks' values made this one

    @property
    def key(self) -> str:
        return figure_key(self.name, self.params)

    def to_dict(self) -> dict:
        return asdict(self)


def figure_key(name: str, params: Optional[dict]) -> str:
    """``name`` alone, or ``name[k=v,...]`` with params sorted: one figure measured at one point."""
    if not params:
        return name
    return f"{name}[{','.join(f'{k}={params[k]}' for k in sorted(params))}]"


_REDUCE = {"mean": lambda v: math.fsum(v) / len(v), "sum": math.fsum, "min": min, "max": max}


class FigureConflict(ValueError):
    """Ranks disagree on what a figure is (its unit, direction or reduction)."""


def round_figures(ranks: Sequence[RankLog]) -> list[Figure]:
    """One figure per (name, params) over all ranks, in the order first reported."""
    groups: dict[str, list[perflog.FigureRecord]] = {}
    for rank in ranks:
        for record in rank.figures:
            groups.setdefault(figure_key(record.name, record.params), []).append(record)
    out = []
    for key, records in groups.items():
        first = records[0]
        for r in records[1:]:
            if (r.unit, r.better, r.reduce) != (first.unit, first.better, first.reduce):
                raise FigureConflict(f"figure {key}: rank {r.rank} reports {r.unit}/{r.better}/{r.reduce}, "
                                     f"rank {first.rank} {first.unit}/{first.better}/{first.reduce}")
        value = _REDUCE[first.reduce]([float(r.value) for r in records])
        out.append(Figure(first.name, value, first.unit, first.better, first.params, first.formula,
                          len(records)))
    return out


def mfu_figures(figures: Sequence[Figure], peaks: Sequence[tuple[str, Optional[float], str]]) -> list[Figure]:
    """Each ``<part>.tflops_per_device`` figure (a PPO phase's) against each known peak: ``<part>.mfu``
    against the vendor's datasheet peak, ``<part>.mfu_measured`` against the calibrated GEMM peak, each
    with its denominator named in the formula. ``peaks``: (suffix, TFLOP/s or None, what the peak is)."""
    out = []
    for figure in figures:
        if not figure.name.endswith(".tflops_per_device"):
            continue
        part = figure.name.removesuffix(".tflops_per_device")
        for suffix, peak, basis in peaks:
            if peak:
                used = derive.part_utilisation(figure.name, figure.value, peak, basis)
                out.append(Figure(f"{part}.{suffix}", used.mfu, "fraction", "higher", figure.params, used.note,
                                  figure.ranks))
    return out


def figures_from_dicts(items: Sequence[dict]) -> list[Figure]:
    return [Figure(**item) for item in items]


def across_rounds(rounds: Sequence[Sequence[Figure]]) -> list[dict]:
    """Per figure key: name, params, unit, better, formula and the Stats of its value over the rounds
    that reported it."""
    # analyze imports collect; keep this module importable on its own
    from run_benchmarks.results.figures.analyze import Stats
    seen: dict[str, list[Figure]] = {}
    for figures in rounds:
        for f in figures:
            seen.setdefault(f.key, []).append(f)
    out = []
    for key, items in seen.items():
        first = items[0]
        stats = Stats.of([f.value for f in items])
        out.append({"key": key, "name": first.name, "params": first.params, "unit": first.unit,
                    "better": first.better, "formula": first.formula, "stats": asdict(stats)})
    return out

"""Logs of every line format written from a known truth, for the importers' property tests (issue 40).

A ``Truth`` is what a run did: its log interval, per log point and rank the interval's mean step time, the
global batch, the sequence length and the devices, which points the log shows (a log pasted into an issue skips
lines), which ranks print, a rank that printed only its warm-up, interleaved evaluations, the device's memory.
Each writer prints it as its tool's printing code does (the field tables' sources: run_benchmarks/results/
importers/*_fields.py), rounding as the tool rounds; ``expected`` works the figures out from the truth alone: the
lowest rank with lines after its warm-up, each line weighted by the steps it covers as its tool counts them.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Optional

GIB, MIB = float(1 << 30), float(1 << 20)


@dataclass
class Truth:
    fmt: str
    variant: str
    interval: int
    points: int  # log points: steps interval, 2 x interval, ...
    shown: list  # the points the log shows (1-based)
    tau: dict  # rank -> [step time of each point's interval, s]; tau[rank][0] is the first step's
    batch: int
    seq: int
    world: int
    ranks: list  # ranks printing lines: [None] (no prefix) or ints
    warm_only: Optional[int] = None  # a rank whose only line is its first
    evals: set = field(default_factory=set)  # points followed by an evaluation line
    stated: bool = False  # the log states its interval
    memory_gib: dict = field(default_factory=dict)  # rank -> [peak memory per point, GiB]
    device_gib: float = 80.0
    repeats: int = 1  # each step's unprefixed line printed once per rank (torchtitan without rank prefixes)
    skip: int = 1

    @property
    def first_report(self) -> bool:
        """Whether a line at step 1 is printed first: torchtitan always, Megatron-Core since 2025."""
        return self.fmt == "torchtitan" or self.variant == "core2025"

    def lines(self, rank) -> list[tuple[int, int, float]]:
        """(step, steps it covers as the tool counts them, its mean step time) of each line ``rank`` prints."""
        taus, step_l = self.tau[rank], self.interval
        out = [(1, 1, taus[0])] if self.first_report else []
        for k in self.shown:
            cover = step_l
            if k == 1 and self.fmt == "torchtitan":
                cover = step_l - 1  # its counters restarted after the step-1 line
            out.append((k * step_l, cover, taus[k]))
        return out[:1] if self.warm_only is not None and rank == self.warm_only else out

    def steady(self, rank) -> list[tuple[int, int, float]]:
        lines = self.lines(rank)
        warm_end = lines[self.skip - 1][0] if len(lines) >= self.skip else math.inf
        return [line for line in lines[self.skip:] if line[0] - line[1] >= warm_end]

    @property
    def chosen(self):
        order = sorted(r for r in self.ranks if r is not None) + [r for r in self.ranks if r is None]
        return next((r for r in order if self.steady(r)), order[0])

    def expected(self) -> dict:
        lines = self.steady(self.chosen)
        steps = sum(c for _, c, _ in lines)
        seconds = math.fsum(c * t for _, c, t in lines)
        taus = [t for _, _, t in lines]
        memory = [m for rank in self.ranks for k, m in enumerate(self.memory_gib.get(rank, [])) if k in self._memory(rank)]
        return {"rank": self.chosen, "lines": len(lines), "step_median": statistics.median(taus),
                "step_mean": statistics.fmean(taus), "samples_per_s": self.batch * steps / seconds,
                "steps_per_s": steps / seconds,
                "tokens_per_s_per_device": self.batch * self.seq * steps / seconds / self.world,
                "memory_bytes": max(memory) * GIB if memory else None}

    def _memory(self, rank) -> set:
        """Indexes into memory_gib of the lines of ``rank`` that print its memory (0: the step-1 line). Megatron
        reports memory once, after its first line; NeMo 1 and the 2022 Trainer print none."""
        shown = ([0] if self.first_report else []) + list(self.shown)
        if self.fmt.startswith("megatron") or (self.warm_only is not None and rank == self.warm_only):
            return set(shown[:1])
        return set() if self.variant in ("nemo1", "2022") else set(shown)

    def loss(self, rank, k: int) -> float:
        return 10.0 - k * 0.01 - (rank or 0) * 0.001


def flops_per_step_per_device(truth: Truth) -> float:
    """A model's FLOPs of one step on one device (6 x 1e10 parameters x tokens): the tool's own count."""
    return 6e10 * truth.batch * truth.seq / truth.world

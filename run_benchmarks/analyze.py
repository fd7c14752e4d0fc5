"""Figures from perf records: per step -> per rank -> per round -> per case.

Definitions (all over measured steps, i.e. warm-up excluded):
  step time        per step, the slowest rank's synchronised wall time (the
                   ranks wait for each other in every gradient all-reduce)
  tokens/s total   all ranks' tokens / sum of step times
  tokens/s/device  tokens/s total / world size; its spread across ranks is each
                   rank's own tokens / its own step times
  TFLOP/s/device   flops_per_token x tokens/s/device / 1e12 (model FLOPs); where
                   batches vary in width the steps carry their own FLOPs, and it
                   is their sum / time / world size
  MFU              TFLOP/s/device / the vendor's peak for the precision used
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from .collect import RankLog

CV_FLAG = 0.05  # rounds whose figures vary more than this are flagged


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    cv: float  # std / mean

    @classmethod
    def of(cls, values: Sequence[float]) -> Optional["Stats"]:
        values = [float(v) for v in values]
        if not values:
            return None
        mean = statistics.fmean(values)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(len(values), mean, statistics.median(values), std, min(values), max(values),
                   std / mean if mean else math.nan)


@dataclass(frozen=True)
class RoundMetrics:
    world_size: int
    warmup_steps: int
    measured_steps: int
    n_params: int
    trainable_params: Optional[int]
    precision: str
    step_time_s: Stats
    tokens_per_step: int
    tokens_per_s_total: float
    tokens_per_s_per_device: float
    tokens_per_s_per_rank: Stats
    effective_tokens_per_s_per_device: Optional[float]
    flops_per_token: float
    flop_formula: str
    tflops_per_device: float
    peak_tflops: Optional[float]
    mfu: Optional[float]
    mfu_note: str
    peak_memory_bytes: Stats
    memory_total_bytes: Optional[int]
    memory_kind: str
    loss_first: float
    loss_last: float

    def to_dict(self) -> dict:
        return asdict(self)


class NothingToMeasure(ValueError):
    pass


def round_metrics(ranks: list[RankLog], peak_tflops: Optional[float], peak_note: str) -> RoundMetrics:
    """Figures of one complete round; every rank must have its start, steps and end."""
    if not ranks or any(r.start is None or r.end is None for r in ranks):
        raise NothingToMeasure("not every rank reported start and end")
    first = ranks[0].start
    measured = [[s for s in r.steps if not s.warmup] for r in ranks]
    common_steps = set.intersection(*({s.step for s in steps} for steps in measured))
    if not common_steps:
        raise NothingToMeasure("no measured step is common to all ranks")
    times_by_rank = [{s.step: s.step_time_s for s in steps} for steps in measured]
    tokens_by_rank = [{s.step: s.tokens for s in steps} for steps in measured]
    step_times = [max(t[step] for t in times_by_rank) for step in sorted(common_steps)]
    total_tokens = sum(tokens[step] for tokens in tokens_by_rank for step in common_steps)
    tokens_per_s_total = total_tokens / sum(step_times)
    per_device = tokens_per_s_total / len(ranks)
    per_rank = [
        sum(tokens_by_rank[i][s] for s in common_steps) / sum(times_by_rank[i][s] for s in common_steps)
        for i in range(len(ranks))
    ]
    effective = [s.effective_tokens for steps in measured for s in steps if s.step in common_steps]
    effective_per_device = (sum(effective) / sum(step_times) / len(ranks)
                            if effective and None not in effective else None)
    step_flops = [s.flops for steps in measured for s in steps if s.step in common_steps]
    if step_flops and None not in step_flops:
        tflops = sum(step_flops) / sum(step_times) / len(ranks) / 1e12
    else:
        tflops = first.flops_per_token * per_device / 1e12
    mfu = tflops / peak_tflops if peak_tflops else None
    note = f"MFU = {tflops:.4g} / {peak_tflops:g} TFLOP/s ({first.precision} peak)" if peak_tflops else peak_note
    rank0_steps = sorted(ranks[0].steps, key=lambda s: s.step)
    return RoundMetrics(
        world_size=len(ranks),
        warmup_steps=sum(1 for s in ranks[0].steps if s.warmup),
        measured_steps=len(common_steps),
        n_params=first.n_params,
        trainable_params=first.trainable_params,
        precision=first.precision,
        step_time_s=Stats.of(step_times),
        tokens_per_step=sum(r.start.tokens_per_step for r in ranks),
        tokens_per_s_total=tokens_per_s_total,
        tokens_per_s_per_device=per_device,
        tokens_per_s_per_rank=Stats.of(per_rank),
        effective_tokens_per_s_per_device=effective_per_device,
        flops_per_token=first.flops_per_token,
        flop_formula=first.flop_formula,
        tflops_per_device=tflops,
        peak_tflops=peak_tflops,
        mfu=mfu,
        mfu_note=note,
        peak_memory_bytes=Stats.of([r.end.peak_memory_bytes for r in ranks]),
        memory_total_bytes=ranks[0].end.memory_total_bytes,
        memory_kind=ranks[0].end.memory_kind,
        loss_first=rank0_steps[0].loss,
        loss_last=rank0_steps[-1].loss,
    )


CASE_FIGURES = ("tokens_per_s_total", "tokens_per_s_per_device", "effective_tokens_per_s_per_device",
                "tflops_per_device", "mfu")


def across_rounds(rounds: list[Optional[RoundMetrics]]) -> dict:
    """Mean, spread and a variability flag of each headline figure over a case's ok rounds."""
    done = [r for r in rounds if r is not None]
    out: dict = {"rounds": len(rounds), "rounds_ok": len(done)}
    for figure in CASE_FIGURES:
        values = [getattr(r, figure) for r in done if getattr(r, figure) is not None]
        stats = Stats.of(values)
        out[figure] = asdict(stats) if stats else None
        if stats and stats.n > 1 and stats.cv > CV_FLAG:
            out.setdefault("flags", []).append(f"{figure} varies {stats.cv:.1%} across rounds (> {CV_FLAG:.0%})")
    step_medians = [r.step_time_s.median for r in done]
    out["step_time_median_s"] = asdict(Stats.of(step_medians)) if step_medians else None
    return out

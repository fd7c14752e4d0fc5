"""Figures from perf records: per step -> per rank -> per round -> per case.

Definitions (all over measured steps, i.e. warm-up excluded):
  step time        per step, the slowest rank's synchronised wall time (the
                   ranks wait for each other in every gradient all-reduce)
  tokens/s total   all ranks' tokens / sum of step times
  tokens/s/device  tokens/s total / world size; its spread across ranks is each
                   rank's own tokens / its own step times
  TFLOP/s/device   flops_per_token x tokens/s/device / 1e12 (model FLOPs); where
                   batches vary in width the steps carry their own FLOPs, and it
                   is their sum / time / world size (results/figures/derive.py, as for imports)
  MFU              TFLOP/s/device / the vendor's peak for the precision used (figures/derive.py)
  samples/step     what the workers report, summed over ranks (the layout's global batch,
                   training/contract/batch.py, only for workers from before they reported it)
  rate noise       the rate's 95 % interval from its steps resampled (figures/noise.py)

A round with a figure no run can measure (impossible.py: negative or non-finite throughput or step time,
MFU over 100 %, a step faster than its FLOPs at the declared peak) has no figures: ImpossibleFigures names
each with its bound, and the round is failed with that reason.

Over 300 lines: one round's analysis is one pipeline (records -> per-rank series -> the round's figures);
split, the warm-up and slowest-rank rules its steps share would be read in several files.
"""
from __future__ import annotations

import math
import operator
import statistics
from array import array
from dataclasses import asdict, dataclass
from itertools import repeat
from typing import Optional, Sequence

from training.contract import perflog

from run_benchmarks.results.figures import derive, noise
from run_benchmarks.results.worker_logs.rank_logs import RankLog, StepSeries
from run_benchmarks.results.figures.impossible import impossible

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
        n = len(values)
        mean = math.fsum(values) / n  # fsum, not statistics.stdev: exact enough and fast on 10^6 steps
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        return cls(n, mean, statistics.median(values), std, min(values), max(values),
                   std / mean if mean else math.nan)


STEP_SERIES_POINTS = 512  # step times kept for plots: bucket means beyond this many steps
LOSS_SERIES_POINTS = 4096  # losses kept per round: every step of any run this long, bucket means beyond


@dataclass(frozen=True)
class RoundMetrics:
    world_size: int
    nnodes: int
    warmup_steps: int
    measured_steps: int
    n_params: int
    trainable_params: Optional[int]
    precision: str
    step_time_s: Stats
    step_time_series: list  # [[step, seconds], ...] of the slowest rank, at most STEP_SERIES_POINTS
    first_step_time_s: Optional[float]  # step 0, warm-up: compilation, allocator growth, first collectives
    init_time_s: Optional[float]  # slowest rank: process start -> first step (imports, model, data, groups)
    tokens_per_step: int
    samples_per_step: Optional[int]
    tokens_per_s_total: float
    tokens_per_s_per_device: float
    tokens_per_s_per_rank: Stats
    tokens_per_s_per_node: list
    samples_per_s: Optional[float]
    effective_tokens_per_s_per_device: Optional[float]
    flops_per_token: float
    flop_formula: str
    tflops_per_device: float
    peak_tflops: Optional[float]
    mfu: Optional[float]
    mfu_note: str
    peak_memory_bytes: Stats  # the allocator's peak (memory_kind allocated), or the process's peak RSS (rss)
    memory_total_bytes: Optional[int]  # the vendor's declared device memory, else what the worker read
    memory_kind: str
    loss_first: float
    loss_last: float
    peak_memory_reserved_bytes: Optional[Stats] = None  # the allocator's reserved peak: device memory in use
    memory_total_source: str = "worker"  # declared (vendor.yaml memory_gib) or worker (the device/host's reading)
    recompiles: Optional[int] = None  # graphs compiled inside measured steps (most on any rank); None: eager
    measured_peak_tflops: Optional[float] = None  # the GEMM peak `accelbench calibrate` measured (not datasheet)
    mfu_measured: Optional[float] = None  # tflops_per_device / measured_peak_tflops
    mfu_measured_note: str = ""  # the formula and which measurement, or why there is none
    # [[step, loss], ...] of the lowest rank, warm-up included, every step up to LOSS_SERIES_POINTS (bucket means
    # beyond): what a loss-curve reference (results/checks/loss_reference.py) checks and the report's loss chart draws
    loss_series: Optional[list] = None
    time_breakdown: Optional[dict] = None  # measured and expected parts of a step (results/breakdown/step.py)
    rate_noise: Optional[dict] = None  # the rate's own noise: its steps resampled (results/figures/noise.py)

    def to_dict(self) -> dict:
        return asdict(self)


class NothingToMeasure(ValueError):
    pass


class ImpossibleFigures(NothingToMeasure):
    """Figures that cannot be (impossible.impossible), each named with its value and bound."""


@dataclass
class _RankTotals:
    rank: int
    node_rank: int
    tokens: float  # over its measured steps
    seconds: float
    steps: int
    tokens_per_step: int
    samples_per_step: Optional[float]  # as the worker reported it (None: a worker from before the field)
    peak_memory_bytes: int
    peak_memory_reserved_bytes: Optional[int]
    recompiles: Optional[int]


@dataclass(frozen=True)
class _FirstRank:
    rank: int
    start: perflog.StartRecord
    end: perflog.EndRecord
    warmup: int
    first_step_time_s: Optional[float]
    loss_first: Optional[float]
    loss_last: Optional[float]
    loss_series: list


class RoundAccumulator:
    """Folds the ranks of a round in one at a time.

    Per step it keeps the slowest rank's time, how many ranks reported it and their token (and FLOP)
    sums: memory grows with the step count, never with ranks or log size, so a rank's columns can be
    dropped as soon as it is folded in.
    """

    def __init__(self) -> None:
        self.max_time, self.count = array("d"), array("q")
        self.tokens, self.effective, self.flops = array("d"), array("d"), array("d")
        self.has_effective = self.has_flops = True
        self.ranks: list[_RankTotals] = []
        self.first: Optional[_FirstRank] = None  # the lowest rank: model facts, loss
        self.init_times: list[float] = []
        self.missing: list[int] = []

    def add(self, rank: RankLog) -> None:
        if rank.start is None or rank.end is None:
            self.missing.append(rank.rank)
            return
        s = rank.series
        if self.first is None or rank.rank < self.first.rank:  # copied: the caller may drop the columns
            self.first = _FirstRank(rank.rank, rank.start, rank.end, s.warmup, s.first_step_time_s, s.loss_first,
                                    s.loss_last, _thin(list(s.loss_steps), list(s.losses), LOSS_SERIES_POINTS))
        if rank.start.init_time_s is not None:
            self.init_times.append(rank.start.init_time_s)
        self.ranks.append(_RankTotals(rank.rank, rank.start.node_rank, math.fsum(s.tokens), math.fsum(s.times),
                                      len(s.steps), rank.start.tokens_per_step, rank.start.samples_per_step,
                                      rank.end.peak_memory_bytes,
                                      rank.end.peak_memory_reserved_bytes, rank.end.recompiles))
        if self.has_effective and not s.has_effective:
            self.has_effective, self.effective = False, array("d")
        if self.has_flops and not s.has_flops:
            self.has_flops, self.flops = False, array("d")
        if len(s.steps):
            self._fold(s)

    def _columns(self) -> list[tuple[array, str]]:
        """(accumulated column, the StepSeries column added into it) for the columns still kept."""
        out = [(self.tokens, "tokens")]
        if self.has_effective:
            out.append((self.effective, "effective"))
        if self.has_flops:
            out.append((self.flops, "flops"))
        return out

    def _fold(self, s: StepSeries) -> None:
        first, n = s.steps[0], len(s.steps)
        end = first + n
        grow = max(0, max(end, s.steps[-1] + 1) - len(self.count))
        for column in (self.max_time, self.count, *(c for c, _ in self._columns())):
            column.frombytes(bytes(column.itemsize * grow))  # zeros, at memcpy speed
        if s.steps == array("q", range(first, end)):  # the usual case: whole columns at C speed
            if self.count[first:end].count(0) == n:  # no rank here yet: copy
                self.max_time[first:end] = s.times
                for column, name in self._columns():
                    column[first:end] = getattr(s, name)
                self.count[first:end] = array("q", repeat(1, n))
                return
            self.max_time[first:end] = array("d", map(max, self.max_time[first:end], s.times))
            self.count[first:end] = array("q", map(operator.add, self.count[first:end], repeat(1, n)))
            for column, name in self._columns():
                column[first:end] = array("d", map(operator.add, column[first:end], getattr(s, name)))
            return
        for i, step in enumerate(s.steps):
            self.max_time[step] = max(self.max_time[step], s.times[i])
            self.count[step] += 1
            for column, name in self._columns():
                column[step] += getattr(s, name)[i]

    def metrics(self, peak_tflops: Optional[float], peak_note: str,
                samples_per_step: Optional[int] = None, memory_total_bytes: Optional[int] = None,
                measured_peak: tuple[Optional[float], str] = (None, "")) -> RoundMetrics:
        """``samples_per_step``: the layout's global batch, used only where a worker did not report its own (logs
        of workers from before StartRecord.samples_per_step). ``memory_total_bytes``: the device memory the vendor declares, which wins over the worker's reading
        (a CPU-backed kind would otherwise report the host's RAM). ``measured_peak``: (TFLOP/s, note) of the
        calibrated GEMM peak, a second MFU denominator beside the datasheet's."""
        if self.missing or self.first is None:
            raise NothingToMeasure("not every rank reported start and end")
        reserved = [r.peak_memory_reserved_bytes for r in self.ranks if r.peak_memory_reserved_bytes is not None]
        world = len(self.ranks)
        common = [step for step, count in enumerate(self.count) if count == world]
        if not common:
            raise NothingToMeasure("no measured step is common to all ranks")
        start, first = self.first.start, self.first
        reported = [r.samples_per_step for r in self.ranks]
        if reported and None not in reported:  # what the workers processed wins over what the layout implies
            total = round(math.fsum(reported), 6)
            samples_per_step = int(total) if total.is_integer() else total
        step_times = [self.max_time[step] for step in common]
        seconds = math.fsum(step_times)
        tokens_per_s_total = math.fsum(self.tokens[step] for step in common) / seconds
        per_device = tokens_per_s_total / world
        effective = (math.fsum(self.effective[step] for step in common) / seconds / world
                     if self.has_effective else None)
        if self.has_flops:
            tflops = derive.tflops_of_steps(math.fsum(self.flops[step] for step in common), seconds, world)
        else:
            tflops = derive.tflops_per_device(start.flops_per_token, per_device)
        used = derive.utilisation(tflops, peak_tflops, start.precision, peak_note)
        measured = derive.measured_utilisation(tflops, measured_peak[0], measured_peak[1])
        nodes: dict[int, float] = {}  # tokens per node over the common steps (exact when all steps are)
        for r in self.ranks:
            nodes[r.node_rank] = nodes.get(r.node_rank, 0.0) + r.tokens * len(common) / max(1, r.steps)
        metrics = RoundMetrics(
            world_size=world,
            nnodes=len(nodes),
            warmup_steps=first.warmup,
            measured_steps=len(common),
            n_params=start.n_params,
            trainable_params=start.trainable_params,
            precision=start.precision,
            step_time_s=Stats.of(step_times),
            step_time_series=_thin(common, step_times),
            first_step_time_s=first.first_step_time_s,
            init_time_s=max(self.init_times) if self.init_times else None,
            tokens_per_step=sum(r.tokens_per_step for r in self.ranks),
            samples_per_step=samples_per_step,
            tokens_per_s_total=tokens_per_s_total,
            tokens_per_s_per_device=per_device,
            tokens_per_s_per_rank=Stats.of([r.tokens / r.seconds for r in self.ranks if r.seconds > 0]),
            tokens_per_s_per_node=[nodes[n] / seconds for n in sorted(nodes)],
            samples_per_s=samples_per_step * len(common) / seconds if samples_per_step else None,
            effective_tokens_per_s_per_device=effective,
            flops_per_token=start.flops_per_token,
            flop_formula=start.flop_formula,
            tflops_per_device=tflops,
            peak_tflops=peak_tflops,
            mfu=used.mfu,
            mfu_note=used.note,
            peak_memory_bytes=Stats.of([r.peak_memory_bytes for r in self.ranks]),
            memory_total_bytes=memory_total_bytes or self.first.end.memory_total_bytes,
            memory_total_source="declared" if memory_total_bytes else "worker",
            memory_kind=self.first.end.memory_kind,
            loss_first=first.loss_first,
            loss_last=first.loss_last,
            peak_memory_reserved_bytes=Stats.of(reserved) if reserved and len(reserved) == len(self.ranks) else None,
            recompiles=max(counts) if (counts := [r.recompiles for r in self.ranks if r.recompiles is not None])
            else None,
            measured_peak_tflops=measured_peak[0],
            mfu_measured=measured.mfu,
            mfu_measured_note=measured.note,
            loss_series=first.loss_series or None,
            rate_noise=noise.round_noise(step_times, [self.tokens[step] for step in common]),
        )
        checked = metrics.to_dict()
        if self.has_flops:  # steps carry their own FLOPs: flops_per_token x tokens_per_step is no step's count
            checked.pop("flops_per_token")
        problems = impossible(checked, peak_tflops)
        if problems:
            raise ImpossibleFigures("impossible figure(s): " + "; ".join(problems))
        return metrics


def _thin(steps: list[int], times: list[float], points: int = STEP_SERIES_POINTS) -> list:
    if len(steps) <= points:
        return [[s, t] for s, t in zip(steps, times)]
    size = len(steps) / points
    out = []
    for k in range(points):
        lo, hi = int(k * size), int((k + 1) * size)
        out.append([steps[lo], math.fsum(times[lo:hi]) / (hi - lo)])
    return out


def round_metrics(ranks: Sequence[RankLog], peak_tflops: Optional[float], peak_note: str,
                  samples_per_step: Optional[int] = None) -> RoundMetrics:
    """Figures of one complete round; every rank must have its start, steps and end."""
    if not ranks:
        raise NothingToMeasure("no rank reported")
    acc = RoundAccumulator()
    for rank in ranks:
        acc.add(rank)
    return acc.metrics(peak_tflops, peak_note, samples_per_step)


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

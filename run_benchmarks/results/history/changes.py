"""Change points and outliers in one workload's series of points (one point per run, oldest first).

The rules (README, "History"), on the log of the figure, so a shift is a ratio whatever the figure's size:

- **noise** (sigma): the larger of the series' own point-to-point noise (the median absolute difference of
  successive points, scaled to a standard deviation: robust to one shift and to a bad day) and the median of the
  points' own noise (each point's standard error from its rounds' stored bootstrap interval and the spread
  between its repeats, results/figures/noise.py); never below ``NOISE_FLOOR``. Estimated again once outliers are left
  out (a bad day is two large steps between successive points).
- **outlier** (a single bad day, or two): a run of fewer than ``MIN_SHIFT`` points, each more than
  ``OUTLIER_SIGMAS`` sigma on the same side of the median of the ``MIN_SHIFT`` points before the run and of the
  ``MIN_SHIFT`` points after it (the points just outside the run nearer those medians than the run). Named,
  and left out of the search and of the sides' means. The newest points cannot be told from the start of a
  shift yet: such a run at the end is *pending*, left out the same way.
- **shift** (a change point): found by ruptures' binary segmentation (least squares on the points divided by
  sigma), every segment at least ``MIN_SHIFT`` points long, splitting while a split's gain exceeds the gain that a
  series of pure noise of the same length exceeds with probability ``ALPHA``. That threshold is simulated (seeded)
  with the same noise estimate applied, so it is a significance level, not a penalty tuned to the data; a split
  of a shorter segment is held to the whole series' threshold, so every change point is significant at
  ``ALPHA`` or better (its ``p`` is the share of simulated noise series whose best split gains as much).
- **size**: B / A - 1 of the geometric means of the two segments, with its 95 % interval from the sides' noise
  (noise.side_log_se: the points' own noise or the spread between the side's points, the larger); a change is a
  regression or an improvement beyond the noise when that interval excludes 0 (noise.verdict).

Why ruptures and not Apache Otava: see the README; in short, otava 0.8.0 pins numpy 2.2.0 (and brings BigQuery,
Slack and Postgres clients), which would replace this environment's numpy, while ruptures installs on top of it;
ruptures has no significance of its own, which the simulated threshold above gives it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Sequence

from run_benchmarks.results.figures import noise

MIN_SHIFT = 3  # a shift holds at least this many consecutive points; fewer off the level are outliers
MIN_POINTS = 2 * MIN_SHIFT  # the fewest points a workload is judged on: MIN_SHIFT on each side of a change
OUTLIER_SIGMAS = 5.0  # how far from both neighbouring levels a point must sit to be an outlier
ALPHA = 0.01  # the chance that a series of pure noise shows a change point
NOISE_FLOOR = 1e-4  # 0.01 %: no series is reproducible below this, and identical points must not divide by 0
NULL_SERIES = 4000  # simulated noise series per length (fewer for very long series: NULL_BUDGET values)
NULL_BUDGET = 4_000_000
SEED = 20261201
_MAD_TO_SD = 0.6744897501960817 * math.sqrt(2)  # median |x_i - x_{i-1}| of N(0, s^2) noise, over s

RULES = (f"a change point holds >= {MIN_SHIFT} points on each side and is significant at {ALPHA:.0%} (ruptures' binary "
         f"segmentation, least squares, threshold simulated from noise series of the same length); an outlier "
         f"sits > {OUTLIER_SIGMAS:g} sigma from the {MIN_SHIFT} points on each side; a workload needs "
         f">= {MIN_POINTS} points")


@dataclass(frozen=True)
class Shift:
    """A change point: ``index`` is the first point of the new level (indices into the series given)."""
    index: int
    before: tuple[int, int]  # first and last point of the segment before (outliers excluded)
    after: tuple[int, int]
    size: float  # B / A - 1
    interval: Optional[tuple[float, float]]  # its 95 % interval; None where a side's noise is unknown
    verdict: Optional[str]  # within noise | regression | improvement
    p: float  # share of simulated noise series whose best split gains as much
    points_before: int
    points_after: int


@dataclass(frozen=True)
class Outlier:
    index: int
    off: float  # relative distance from the level around it (value / level - 1)
    sigmas: float
    pending: bool = False  # the newest points: an outlier, or the first of a shift not yet held long enough


@dataclass
class Found:
    shifts: list[Shift] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    sigma: Optional[float] = None  # the noise used, log scale (~ relative)
    sigma_source: str = ""
    threshold: Optional[float] = None  # the gain a split must exceed, in sigma^2
    judged: bool = False  # enough points (MIN_POINTS) to look for a change
    why: str = ""  # why not judged


def find(values: Sequence[float], log_ses: Sequence[Optional[float]], figure: str = "tokens_per_s_per_device",
         higher_is_better: bool = True) -> Found:
    """The change points and outliers of ``values`` (oldest first; each > 0) whose own noise is ``log_ses``."""
    n = len(values)
    if n < MIN_POINTS:
        return Found(why=f"{n} point(s): a change needs {MIN_SHIFT} on each side ({MIN_POINTS})")
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError("a series of rates must be positive and finite")
    import numpy as np

    y = np.log(np.asarray(values, dtype=float))
    sigma, source = _sigma(y, log_ses)
    outliers = _outliers(y, sigma)
    out = {o.index for o in outliers}
    kept = [i for i in range(n) if i not in out]
    found = Found(outliers=outliers, sigma=sigma, sigma_source=source, judged=True)
    if len(kept) < MIN_POINTS:
        found.judged, found.why = False, f"{len(kept)} point(s) once outliers are left out (needs {MIN_POINTS})"
        return found
    if outliers:  # a bad day is two large steps: a short series' noise is estimated again without it
        sigma, source = _sigma(y[kept], [log_ses[i] for i in kept])
        found.sigma, found.sigma_source = sigma, source + ", outliers left out"
    z = y[kept] / sigma
    maxima = null_maxima(len(kept), MIN_SHIFT)
    found.threshold = float(maxima[min(len(maxima) - 1, math.ceil((1 - ALPHA) * len(maxima)) - 1)])
    bkps = _ruptures().Binseg(model="l2", min_size=MIN_SHIFT, jump=1).fit(z).predict(pen=found.threshold)
    edges = [0] + list(bkps)
    for j in range(1, len(edges) - 1):
        a, b = kept[edges[j - 1]:edges[j]], kept[edges[j]:edges[j + 1]]
        gain = _gain(z[edges[j - 1]:edges[j + 1]], edges[j] - edges[j - 1])
        found.shifts.append(_shift(values, log_ses, a, b, figure, higher_is_better,
                                   float((np.sum(maxima >= gain) + 1) / (len(maxima) + 1))))
    return found


def _ruptures():
    """ruptures, or the install line when the ``history`` extra is missing."""
    try:
        import ruptures
    except ImportError:
        from run_benchmarks.errors import UserError

        raise UserError("finding change points (accelbench history) needs ruptures, which is not installed",
                        "pip install 'accelbench[history]' (ruptures==1.1.10)") from None
    return ruptures


def _sigma(y, log_ses: Sequence[Optional[float]]) -> tuple[float, str]:
    import numpy as np

    series = float(np.median(np.abs(np.diff(y)))) / _MAD_TO_SD
    own = [s for s in log_ses if s is not None and math.isfinite(s)]
    points = float(np.median(own)) if own else None
    if points is not None and points > series:
        return max(points, NOISE_FLOOR), "the points' own noise (rounds' intervals, spread between repeats)"
    return max(series, NOISE_FLOOR), "the spread between successive points"


def _outliers(y, sigma: float) -> list[Outlier]:
    """Runs of 1 to MIN_SHIFT - 1 points, each more than OUTLIER_SIGMAS sigma on the same side of the median of
    the MIN_SHIFT points before the run and of the MIN_SHIFT points after it, the points just outside the run
    nearer those medians than the run (so the middle of a longer run, or the start of a shift, is none)."""
    import statistics

    values = [float(v) for v in y]
    n, far = len(values), OUTLIER_SIGMAS * sigma
    before = [statistics.median(values[max(0, i - MIN_SHIFT):i]) if i else None for i in range(n + 1)]
    after = [statistics.median(values[j:j + MIN_SHIFT]) if j < n else None for j in range(n + 1)]
    out: list[Outlier] = []
    for r in range(1, MIN_SHIFT):
        for i in range(n - r + 1):
            levels = [level for level in (before[i], after[i + r]) if level is not None]
            run = statistics.median(values[i:i + r])
            if not levels or (i and abs(values[i - 1] - before[i]) >= abs(values[i - 1] - run)) or \
                    (i + r < n and abs(values[i + r] - after[i + r]) >= abs(values[i + r] - run)):
                continue  # a point just outside sits nearer the run than the level: the run is part of a shift
            offs = [[values[j] - level for level in levels] for j in range(i, i + r)]
            if len({off > 0 for row in offs for off in row}) == 1 and all(abs(o) > far for row in offs for o in row):
                for j, row in zip(range(i, i + r), offs):
                    off = min(row, key=abs)
                    out.append(Outlier(j, math.exp(off) - 1, abs(off) / sigma, pending=i + r == n))
    return sorted(out, key=lambda o: o.index)


def _gain(z, k: int) -> float:
    """The least-squares gain of splitting ``z`` after its first ``k`` points (ruptures' CostL2)."""
    left, right = z[:k], z[k:]
    return float(((z - z.mean()) ** 2).sum() - ((left - left.mean()) ** 2).sum() - ((right - right.mean()) ** 2).sum())


def _shift(values, log_ses, a: list[int], b: list[int], figure: str, higher_is_better: bool, p: float) -> Shift:
    sides = []
    for idx in (a, b):
        logs = [math.log(values[i]) for i in idx]
        ses = [log_ses[i] for i in idx]
        se = noise.side_log_se(figure, [values[i] for i in idx], ses if all(s is not None for s in ses) else [])
        sides.append((math.exp(math.fsum(logs) / len(logs)), se))
    (mean_a, se_a), (mean_b, se_b) = sides
    interval = noise.change_interval(mean_a, mean_b, se_a, se_b)
    return Shift(b[0], (a[0], a[-1]), (b[0], b[-1]), mean_b / mean_a - 1, interval,
                 noise.verdict(interval, higher_is_better), p, len(a), len(b))


@lru_cache(maxsize=64)
def null_maxima(n: int, min_size: int):
    """The best split's least-squares gain in simulated series of ``n`` standard normal points, each divided by
    its own noise estimate (as ``find`` divides a real series), sorted: the null distribution of the statistic."""
    import numpy as np

    sims = max(400, min(NULL_SERIES, NULL_BUDGET // max(n, 1)))
    z = np.random.default_rng(SEED + n).standard_normal((sims, n))
    z /= np.maximum(np.median(np.abs(np.diff(z, axis=1)), axis=1) / _MAD_TO_SD, NOISE_FLOOR)[:, None]
    sums = np.cumsum(z, axis=1)
    total = sums[:, -1:]
    k = np.arange(min_size, n - min_size + 1)
    left = sums[:, k - 1]
    gains = left ** 2 / k + (total - left) ** 2 / (n - k) - total ** 2 / n
    return np.sort(gains.max(axis=1))

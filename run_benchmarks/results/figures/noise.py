"""The noise of a figure: from a round's own steps, and between rounds; the interval of a change between two sides.

One round: its rate (tokens / seconds over the measured steps) is re-estimated from ``RESAMPLES`` resamples of
its steps with replacement (a bootstrap). Step times drift together (a neighbour's job, the clock, the
allocator), so steps are resampled in contiguous blocks of ``n^(1/3)`` steps once there are ``BLOCKED_FROM`` or
more (a non-overlapping block bootstrap; at most ``MAX_BLOCKS`` blocks), one by one below that. The round
stores the 95 % percentile interval of its rate relative to the rate, and the standard deviation of the
resampled log rates (``log_se``); TFLOP/s and MFU are the rate times a constant within a round, so the same
relative interval is theirs. Seeded: the same steps give the same interval. Up to ``PYTHON_UP_TO`` blocks the
resamples are drawn with Python's generator, above with numpy's: a typical round (tens of steps) then costs a
few milliseconds, where importing numpy alone took 0.3-0.6 s of the orchestrator's time after its workers ended.

A side of a comparison (one workload, k ok rounds) has the log-scale standard error
``max(sqrt(sum(log_se_i^2)) / k, sd(log figure_i) / sqrt(k))``: the rounds' own noise, or the spread between
rounds when that is larger (k >= 2; it holds what changes between rounds that no round's steps show).
The change B/A - 1 then has the interval ``exp(log(B/A) +- 1.96 sqrt(se_A^2 + se_B^2)) - 1``: independent
sides, normal on the log scale. It holds 0: "within noise"; otherwise a regression or an improvement by the
figure's direction. A figure with no noise on a side (a memory figure of one round, an import without step
times) has no interval, and nothing is judged on it.
"""
from __future__ import annotations

import math
import random
from typing import Optional, Sequence

RESAMPLES = 2000
BLOCKED_FROM = 64
MAX_BLOCKS = 512
PYTHON_UP_TO = 64  # blocks resampled with Python's generator; numpy's above (the same choice for the same steps)
Z95 = 1.959964
SEED = 20261128
METHOD = (f"block bootstrap of the measured steps ({RESAMPLES} resamples, blocks of n^(1/3) steps from "
          f"{BLOCKED_FROM} steps), 95 % percentile interval")
RATE_FIGURES = ("tokens_per_s_per_device", "tokens_per_s_total", "effective_tokens_per_s_per_device",
                "samples_per_s", "tflops_per_device", "mfu", "mfu_measured")


def round_noise(step_times: Sequence[float], tokens: Sequence[float]) -> dict:
    """The noise of a round's rate from its measured steps' times and tokens (one value per step)."""
    n = len(step_times)
    spread = _cv(step_times)
    if n < 2 or not math.fsum(step_times) > 0:
        return {"method": METHOD, "steps": n, "step_time_cv": spread, "interval95": None, "log_se": None,
                "why": "one measured step: its spread is unknown"}
    size = 1 if n < BLOCKED_FROM else max(round(n ** (1 / 3)), math.ceil(n / MAX_BLOCKS))
    times = [math.fsum(step_times[i:i + size]) for i in range(0, n, size)]
    counts = [math.fsum(tokens[i:i + size]) for i in range(0, n, size)]
    rate = math.fsum(counts) / math.fsum(times)
    resampled = sorted(r / rate for r in _resample(times, counts))
    logs = [math.log(r) for r in resampled if r > 0]
    mean = math.fsum(logs) / len(logs)
    low, high = resampled[int(0.025 * (len(resampled) - 1))], resampled[math.ceil(0.975 * (len(resampled) - 1))]
    return {"method": METHOD, "steps": n, "block_steps": size, "blocks": len(times), "step_time_cv": spread,
            "interval95": [low - 1, high - 1],
            "log_se": math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / max(1, len(logs) - 1))}


def _resample(times: list[float], counts: list[float]) -> list[float]:
    k = len(times)
    numpy = None
    if k > PYTHON_UP_TO:
        try:
            import numpy
        except ImportError:  # the report's charts bring numpy; without it, Python draws these too
            pass
    if numpy is None:
        rng = random.Random(SEED)
        out = []
        for _ in range(RESAMPLES):
            picks = [rng.randrange(k) for _ in range(k)]
            out.append(math.fsum(counts[i] for i in picks) / math.fsum(times[i] for i in picks))
        return out
    picks = numpy.random.default_rng(SEED).integers(0, k, size=(RESAMPLES, k))
    return (numpy.asarray(counts)[picks].sum(axis=1) / numpy.asarray(times)[picks].sum(axis=1)).tolist()


def _cv(values: Sequence[float]) -> Optional[float]:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) / mean if mean else None


def side_log_se(figure: str, values: Sequence[float], round_log_ses: Sequence[Optional[float]]) -> Optional[float]:
    """A side's standard error on the log scale (module docstring): its rounds' own noise (rate figures only),
    or the spread between its rounds when larger; None when neither is known."""
    k = len(values)
    within = None
    if figure in RATE_FIGURES and round_log_ses and all(se is not None for se in round_log_ses):
        within = math.sqrt(math.fsum(se ** 2 for se in round_log_ses)) / len(round_log_ses)
    between = None
    if k >= 2 and all(v > 0 for v in values):
        logs = [math.log(v) for v in values]
        mean = math.fsum(logs) / k
        between = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (k - 1)) / math.sqrt(k)
    known = [se for se in (within, between) if se is not None]
    return max(known) if known else None


def change_interval(a: Optional[float], b: Optional[float], se_a: Optional[float],
                    se_b: Optional[float]) -> Optional[tuple[float, float]]:
    """The 95 % interval of B/A - 1; None where a side has no figure or no noise."""
    if not a or not b or a <= 0 or b <= 0 or se_a is None or se_b is None:
        return None
    centre, half = math.log(b / a), Z95 * math.hypot(se_a, se_b)
    return math.exp(centre - half) - 1, math.exp(centre + half) - 1


def verdict(interval: Optional[tuple[float, float]], higher_is_better: bool) -> Optional[str]:
    """within noise / regression / improvement; None without an interval."""
    if interval is None:
        return None
    low, high = interval
    if low <= 0 <= high:
        return "within noise"
    return "improvement" if (low > 0) == higher_is_better else "regression"

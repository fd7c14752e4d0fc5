"""What no training run can measure: the one check a round's figures pass before they are stored ``ok``.

A figure named here is impossible, not merely unlikely (a slow or a fast run passes; a run faster than its
hardware does not):

  throughput: tokens/s (total, per device, effective), samples/s    nan, infinite or negative
  effective tokens/s/device                                         over tokens/s/device (padding counted)
  step time: each of its statistics (mean, median, min, max)        nan, infinite, zero or negative
  time to train, first step time, init time                         nan, infinite or negative
  peak memory, allocated and reserved                               nan, infinite or negative
  TFLOP/s per device (ours, and the tool's own ``*_logged``)        nan, infinite, negative, or over the
                                                                    declared peak of one device
  MFU (ours, the tool's ``mfu_logged``, the measured-peak one)      nan, infinite or negative; over 100 %
                                                                    (the measured-peak MFU may pass 100 %:
                                                                    its peak is a measurement, not a bound)
  median step time                                                  shorter than the model FLOPs one device
                                                                    does per step, at the declared peak
  samples/s and tokens/s per device, and the log's own batch over   faster than any device can be, with or
  its step time                                                     without a case (ANY_DEVICE below)
  step time (median)                                                under MIN_STEP_S

What the callers do with an impossible figure (decided here once, for imports and accelbench's own rounds):
the round is **failed**, never stored ``ok`` with the figure dropped. A figure that cannot be says that the
log, its parse or the declared peak is wrong, and its siblings come from the same lines (tokens/s, TFLOP/s
and MFU from one throughput), so none of them can be trusted either. The reason names each impossible figure
with its value and the bound it breaks; ``accelbench import`` then exits 1 (as for any attempt not ok), and a
run's round is failed with that reason (``analyze.ImpossibleFigures``). An import keeps the finite figures of
the failed attempt for diagnosis and stores the non-finite ones as empty (the reason keeps their value).
"""
from __future__ import annotations

import math
from typing import Mapping, Optional

THROUGHPUT = {"tokens_per_s_total": "tokens/s total", "tokens_per_s_per_device": "tokens/s/device",
              "effective_tokens_per_s_per_device": "effective tokens/s/device", "samples_per_s": "samples/s"}
DURATIONS = {"time_to_train_s": "time to train", "first_step_time_s": "first step time",
             "init_time_s": "init time"}
MEMORY = {"peak_memory_bytes": "peak memory", "peak_memory_reserved_bytes": "peak reserved memory"}
TFLOPS = {"tflops_per_device": "TFLOP/s/device", "tflops_per_device_logged": "TFLOP/s/device as logged"}
MFU = {"mfu": "MFU", "mfu_logged": "MFU as logged"}
STEP_STATS = ("mean", "median", "min", "max")

# Bounds on any device, for a log that names no case (no FLOPs, no declared peak): each sample or token of a
# step is at least one byte the device reads, and no device reads more than 1e14 bytes/s (100 TB/s, several
# times any memory's bandwidth); a training step (a forward, a backward and an update: several kernels or
# loops) takes more than a microsecond on any device. An import of 1e-300 ms steps (5.12e305 samples/s) or of
# a 21-digit global batch breaks them; any real run is orders of magnitude inside.
ANY_DEVICE_ITEMS_PER_S = 1e14
MIN_STEP_S = 1e-6


def _show(value: float) -> str:
    return f"{value:,.6g}"


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _bad(value: float, what: str, unit: str = "", positive: bool = False) -> Optional[str]:
    """Why ``value`` cannot be (nan, infinite, negative, or zero where ``positive``), or None."""
    if math.isnan(value):
        return f"{what} is nan (not a number)"
    if math.isinf(value):
        return f"{what} is {'' if value > 0 else '-'}infinite"
    if value < 0:
        return f"{what} {_show(value)}{unit} is negative"
    if positive and value == 0:
        return f"{what} is 0{unit}: no step takes no time"
    return None


def impossible(metrics: Mapping, peak_tflops: Optional[float] = None,
               seq_len: Optional[int] = None) -> list[str]:
    """Every figure of ``metrics`` that cannot be, each with its value and the bound it breaks (empty: none).

    ``metrics``: a round's figures as stored (RoundMetrics' names; a statistic may be a number or a dict of
    mean/median/min/max). ``peak_tflops``: the declared dense peak of one device for the precision used
    (default: ``metrics['peak_tflops']``; none: no bound from the hardware). ``seq_len``: tokens per sample,
    for a step's tokens when ``metrics`` gives samples per step only (an import).
    """
    problems: list[str] = []
    peak = _number(peak_tflops if peak_tflops is not None else metrics.get("peak_tflops"))
    peak = peak if peak is not None and math.isfinite(peak) and peak > 0 else None
    for key, what in {**THROUGHPUT, **DURATIONS, **TFLOPS, **MFU, "mfu_measured": "MFU (measured peak)"}.items():
        value = _number(metrics.get(key))
        if value is not None and (why := _bad(value, what, " s" if key in DURATIONS else "")):
            problems.append(why)
        elif value is not None and key in MFU and value > 1:
            problems.append(f"{what} {_show(value * 100)} % is over 100 %")
        elif value is not None and key in TFLOPS and peak is not None and value > peak:
            problems.append(f"{what} {_show(value)} is over the declared peak of one device, {_show(peak)} TFLOP/s")
    total, effective = _number(metrics.get("tokens_per_s_per_device")), \
        _number(metrics.get("effective_tokens_per_s_per_device"))
    if total is not None and effective is not None and effective > total * (1 + 1e-9):
        problems.append(f"effective tokens/s/device {_show(effective)} is over tokens/s/device {_show(total)}, "
                        "padding included: effective tokens are the tokens that are not padding")
    for key, what in MEMORY.items():
        value = metrics.get(key)
        value = _number(value.get("max") if isinstance(value, Mapping) else value)
        if value is not None and (why := _bad(value, what, " bytes")):
            problems.append(why)
    step = metrics.get("step_time_s")
    stats = {k: _number(step.get(k)) for k in STEP_STATS} if isinstance(step, Mapping) else {"median": _number(step)}
    for stat, value in stats.items():
        if value is not None and (why := _bad(value, f"step time ({stat})", " s", positive=True)):
            problems.append(why)
    problems.extend(_faster_than_peak(metrics, stats.get("median"), peak, seq_len))
    problems.extend(_faster_than_any_device(metrics, stats.get("median")))
    return problems


def _faster_than_any_device(metrics: Mapping, median: Optional[float]) -> list[str]:
    """Throughput per device, and the batch over the step time, against what no device exceeds (ANY_DEVICE)."""
    problems = []
    if median is not None and math.isfinite(median) and 0 < median < MIN_STEP_S:
        problems.append(f"step time (median) {_show(median)} s is shorter than {_show(MIN_STEP_S)} s, less than "
                        "any device takes for one training step")
    world = _number(metrics.get("world_size"))
    world = world if world is not None and math.isfinite(world) and world >= 1 else 1.0
    batch = _number(metrics.get("samples_per_step"))
    rates = {"samples/s": _number(metrics.get("samples_per_s")),
             "tokens/s/device": _number(metrics.get("tokens_per_s_per_device"))}
    if rates["samples/s"] is None and batch is not None and median is not None and median > 0:
        rates["samples/s"] = batch / median  # the log's own batch over its step time
    for what, rate in rates.items():
        per_device = rate / world if what == "samples/s" and rate is not None else rate
        if per_device is not None and math.isfinite(per_device) and per_device > ANY_DEVICE_ITEMS_PER_S:
            basis = f"{_show(batch)} samples per step, " if what == "samples/s" and batch is not None else ""
            spread = f"{basis}{int(world):,} device(s): {_show(per_device)} per device, " if what == "samples/s" \
                else ""
            problems.append(f"{what} {_show(rate)} ({spread}over {_show(ANY_DEVICE_ITEMS_PER_S)}) is more than "
                            "any device can read (one byte per item at 100 TB/s)")
    return problems


def _faster_than_peak(metrics: Mapping, median: Optional[float], peak: Optional[float],
                      seq_len: Optional[int]) -> list[str]:
    """The median step against the time its model FLOPs take one device at the declared peak."""
    per_token, world = _number(metrics.get("flops_per_token")), _number(metrics.get("world_size"))
    tokens = _number(metrics.get("tokens_per_step"))
    if tokens is None and seq_len and _number(metrics.get("samples_per_step")) is not None:
        tokens = _number(metrics["samples_per_step"]) * seq_len
    if None in (median, peak, per_token, world, tokens) or not (math.isfinite(median) and median > 0 and world > 0):
        return []
    flops = per_token * tokens / world  # one device's share of one step
    least = flops / (peak * 1e12)
    if not math.isfinite(least) or median >= least:
        return []
    return [f"step time (median) {_show(median)} s is shorter than {_show(least)} s, the time one device takes "
            f"for its {_show(flops)} model FLOPs per step at its declared peak of {_show(peak)} TFLOP/s"]

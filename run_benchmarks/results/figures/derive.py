"""The model-FLOP figures of a round, derived once for accelbench's own runs and for imported logs alike.

A run's round (analyze.RoundAccumulator), an import (importers/case_facts.complete), a PPO phase's figures
(task.mfu_figures) and a stored round against a peak calibrated since (report/current_peaks.py) all come
here for TFLOP/s per device, MFU and the note that says what MFU divides by, so one formula and one wording
hold for all of them and a figure read beside another was computed the same way (issues 40 and 44). The
batch a step takes (global batch, tokens per step, world size) is the contract's (training/contract/batch.py),
and so is the TFLOP/s unit (training/contract/flops.py: ``tflop_per_s``), which the worker's own phase figures
use too.

    TFLOP/s/device   FLOPs per token x tokens/s/device / 1e12   (or the steps' own FLOPs / time / devices)
    MFU              TFLOP/s/device / a peak: the declared one of the precision used, or the calibrated GEMM's
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from training.contract.flops import tflop_per_s

NO_PEAK = "no peak: no declared hardware names one"  # an import of no declared hardware, whose note is empty


@dataclass(frozen=True)
class Utilisation:
    """MFU against a peak, and the note every view prints under the figures (what it divides by, or why none)."""

    mfu: Optional[float]
    note: str


def tflops_per_device(flops_per_token: float, tokens_per_s_per_device: float) -> float:
    """Model TFLOP/s of one device: its tokens/s times the FLOPs each token costs (training/contract/flops.py)."""
    return tflop_per_s(flops_per_token * tokens_per_s_per_device)


def tflops_of_steps(step_flops: float, seconds: float, devices: int) -> float:
    """Model TFLOP/s per device from the FLOPs the steps themselves counted (instruction data: the non-padding
    tokens, each at its batch's width), where FLOPs per token x tokens would count padding."""
    return tflop_per_s(step_flops, seconds, devices)


def mfu(tflops: float, peak_tflops: Optional[float]) -> Optional[float]:
    """The fraction of ``peak_tflops`` that ``tflops`` reaches; None without a peak."""
    return tflops / peak_tflops if peak_tflops else None


def utilisation(tflops: float, peak_tflops: Optional[float], precision: Optional[str],
                peak_note: str = "") -> Utilisation:
    """MFU = ``tflops`` / ``peak_tflops``, with its note: ``MFU = 312 / 989.5 TFLOP/s (bf16 peak); <basis>``; with
    no peak, the note says why (the vendor's reason, else ``NO_PEAK``)."""
    if not peak_tflops:
        return Utilisation(None, peak_note or NO_PEAK)
    note = f"MFU = {tflops:.4g} / {peak_tflops:g} TFLOP/s ({precision} peak)" + (f"; {peak_note}" if peak_note else "")
    return Utilisation(mfu(tflops, peak_tflops), note)


def measured_utilisation(tflops: float, measured_tflops: Optional[float], basis: str) -> Utilisation:
    """MFU against the calibrated GEMM peak, beside the datasheet's: ``MFU (measured) = 312 / 701 TFLOP/s
    (<basis>)``; with no calibrated peak, the note is ``basis`` (why there is none, and how to get one)."""
    if not measured_tflops:
        return Utilisation(None, basis)
    return Utilisation(mfu(tflops, measured_tflops),
                       f"MFU (measured) = {tflops:.4g} / {measured_tflops:.4g} TFLOP/s ({basis})")


def part_utilisation(figure: str, tflops: float, peak_tflops: float, basis: str) -> Utilisation:
    """MFU of a part of a step (a PPO phase's ``<part>.tflops_per_device`` figure), its note naming the figure:
    ``experience.tflops_per_device / 12 TFLOP/s (datasheet)``."""
    return Utilisation(mfu(tflops, peak_tflops), f"{figure} / {peak_tflops:g} TFLOP/s ({basis})")

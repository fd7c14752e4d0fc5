"""The model-FLOP figures of a round, derived once for accelbench's own runs and for imported logs alike.

A run's round (analyze.RoundAccumulator) and an import (importers/case_facts.complete) both come here for
TFLOP/s per device, MFU and the note that says what MFU divides by, so one formula and one wording hold for
both and a figure read beside another was computed the same way (issue 40; issue 44 grows this into the one
``derive()`` of every figure).

    TFLOP/s/device   FLOPs per token x tokens/s/device / 1e12   (or the steps' own FLOPs / time / devices)
    MFU              TFLOP/s/device / the declared peak of the precision used
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

NO_PEAK = "no peak: no declared hardware names one"  # an import of no declared hardware, whose note is empty


@dataclass(frozen=True)
class Utilisation:
    """MFU against a peak, and the note every view prints under the figures (what it divides by, or why none)."""

    mfu: Optional[float]
    note: str


def tflops_per_device(flops_per_token: float, tokens_per_s_per_device: float) -> float:
    """Model TFLOP/s of one device: its tokens/s times the FLOPs each token costs (training/contract/flops.py)."""
    return flops_per_token * tokens_per_s_per_device / 1e12


def utilisation(tflops: float, peak_tflops: Optional[float], precision: Optional[str],
                peak_note: str = "") -> Utilisation:
    """MFU = ``tflops`` / ``peak_tflops``, with its note: ``MFU = 312 / 989.5 TFLOP/s (bf16 peak); <basis>``; with
    no peak, the note says why (the vendor's reason, else ``NO_PEAK``)."""
    if not peak_tflops:
        return Utilisation(None, peak_note or NO_PEAK)
    note = f"MFU = {tflops:.4g} / {peak_tflops:g} TFLOP/s ({precision} peak)" + (f"; {peak_note}" if peak_note else "")
    return Utilisation(tflops / peak_tflops, note)

"""MFU of stored rounds against the GEMM peak calibrated since they ran: calibrating helps older runs too.

A round stores the MFU it could compute when it ran: against the datasheet, and against the measured peak
that existed then (or none: "run `accelbench calibrate`"). When ``vendors/<vendor>/measured_peaks.yaml`` now
holds a peak for the row's hardware and precision that the round did not use, ``report`` keeps the stored
MFU and shows beside it ``mfu_current_peak`` = the round's stored TFLOP/s per device / that peak, with a note
naming the peak's date (and its contention, where it was measured under contention); the old "run
calibrate" advice is no longer printed for that row.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from run_benchmarks.catalog import measured_peaks
from run_benchmarks.pathnames import component_problem
from run_benchmarks.results.figures import derive
from run_benchmarks.results.figures.analyze import Stats

KEY = "mfu_current_peak"
PRECISION_KEY = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


def current_peak(vendors_dir: Path, vendor: Optional[str], hardware: Optional[str],
                 precision: Optional[str]) -> Optional[measured_peaks.MeasuredPeak]:
    """The peak calibrated now for that hardware and precision, None where there is none (or the row's names
    are not plain folder names: an imported bundle's rows are never turned into paths)."""
    if not vendor or not hardware or precision not in PRECISION_KEY or component_problem(vendor):
        return None
    try:
        peaks = measured_peaks.load(vendors_dir / vendor).accelerators
    except Exception:  # noqa: BLE001 - a damaged peaks file: the stored figures stand alone
        return None
    return (peaks.get(hardware) or {}).get(PRECISION_KEY[precision])


def add(summaries: Sequence, vendors_dir: Path) -> None:
    """Each row whose ok rounds did not use today's peak gets the figure ``KEY`` and its ``current_peak_note``."""
    for summary in summaries:
        rounds = [a for a in summary.ok if (a.get("metrics") or {}).get("tflops_per_device") is not None]
        if not rounds:
            continue
        first = rounds[0]
        peak = current_peak(vendors_dir, first.get("vendor"), first.get("hardware"), first.get("precision"))
        if peak is None or all((a.get("metrics") or {}).get("measured_peak_tflops") == peak.tflops for a in rounds):
            continue
        summary.figures[KEY] = Stats.of([derive.mfu(a["metrics"]["tflops_per_device"], peak.tflops) for a in rounds])
        summary.current_peak_note = (
            f"MFU (peak calibrated since) = TFLOP/s/device / {peak.tflops:.4g} TFLOP/s: the {first.get('precision')} "
            f"GEMM peak calibrated on {peak.host} at {peak.measured_at}, after these rounds ran; their stored MFU "
            f"stands beside it{measured_peaks.contended(peak)}")


def without_advice(note: Optional[str], current_peak_note: str) -> Optional[str]:
    """A stored MFU note without its advice to calibrate once a peak was calibrated since (the row's
    ``current_peak_note`` then says what MFU is against it)."""
    if not note or not current_peak_note:
        return note
    return "; ".join(part for part in note.split("; ") if "accelbench calibrate" not in part)

"""Measured peaks: ``vendors/<vendor>/measured_peaks.yaml``, the GEMM TFLOP/s ``accelbench calibrate`` measured
per accelerator and dtype. A datasheet says what a chip is sold as; this says what it reached here, and MFU is
shown against both, each named."""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import Field, PositiveFloat

from run_benchmarks.catalog.config import Strict, load_model

FILE_NAME = "measured_peaks.yaml"
CONTENTION = ("others_cpu_share", "steal_share", "memory_pressure_share", "load_average")


class MeasuredPeak(Strict):
    tflops: PositiveFloat = Field(allow_inf_nan=False, description="best GEMM TFLOP/s over the sizes measured")
    shape: tuple[int, int, int] = Field(description="(M, N, K) of the product that reached it")
    measured_at: str = Field(description="UTC time of the calibration")
    host: str = Field(description="the machine it was measured on")
    command: str = Field(description="what measured it, to measure it again")
    load_average_1m: Optional[float] = Field(None, description="the machine's 1-minute load average just before")
    cpu_count: Optional[int] = Field(None, description="the machine's logical CPUs, to read the load against")
    under_load: list[str] = Field(default_factory=list, description=(
        "why it was measured under contention, a short line each (others' CPU, steal or memory pressure past "
        "test_conf's contention limits during the benchmark): such a peak is low, and every MFU (measured) against "
        "it high"))
    contention: Optional[dict[str, Optional[float]]] = Field(None, description=(
        "the contention figures over the benchmark (execute/contention.py): " + ", ".join(CONTENTION)))


class MeasuredPeaks(Strict):
    """Per accelerator name, per dtype."""

    accelerators: dict[str, dict[Literal["fp32", "tf32", "fp16", "bf16", "fp8"], MeasuredPeak]] = Field(
        default_factory=dict)


def path_for(vendor_dir: Path) -> Path:
    return vendor_dir / FILE_NAME


def load(vendor_dir: Path) -> MeasuredPeaks:
    path = path_for(vendor_dir)
    return load_model(MeasuredPeaks, path) if path.is_file() else MeasuredPeaks()


def save(vendor_dir: Path, peaks: MeasuredPeaks) -> Path:
    path = path_for(vendor_dir)
    text = ("# Written by `accelbench calibrate`: GEMM peaks measured on this hardware (not a datasheet).\n"
            + yaml.safe_dump(peaks.model_dump(mode="json"), sort_keys=True))
    path.write_text(text, encoding="utf-8")
    return path


def describe(peaks: dict[str, MeasuredPeak], hardware: str, dtype: str) -> tuple[Optional[float], str]:
    """The measured peak for ``dtype`` and a note that names it, or (None, why there is none)."""
    peak = peaks.get(dtype)
    if peak is None:
        return None, f"no measured {dtype} peak for {hardware}: run `accelbench calibrate {hardware}`"
    m, n, k = peak.shape
    return peak.tflops, (f"{dtype} GEMM peak measured by accelbench calibrate on {peak.host} at {peak.measured_at} "
                         f"({m}x{n}x{k}){contended(peak)}")


def contended(peak: MeasuredPeak) -> str:
    """``; its peak was measured under contention (others used 63% ...): may read high``, one short clause."""
    if not peak.under_load:
        return ""
    more = f" and {len(peak.under_load) - 1} more" if len(peak.under_load) > 1 else ""
    return f"; measured under contention ({peak.under_load[0][:120]}{more}): MFU (measured) may read high"

"""Fairness lint for a vendor file: mistakes neighbouring projects have published, caught where the file says
enough to catch them (``vendor check`` lists them beside its other findings).

- Sparse peaks: peaks are dense. A datasheet figure "with sparsity" is twice the dense one and halves every
  MFU; the vendor file cannot say which it copied, but a calibrated GEMM (``accelbench calibrate``) can: a
  declared peak more than SPARSE_SUSPECT times what the GEMM reached here is questioned.
- What a device is: a card of two dies seen as one device, or one die of a two-die card seen as a device,
  changes every per-device figure (memory, peak, tokens/s per device). Every accelerator that is not the CPU
  states ``dies_per_device`` (and ``devices_per_card`` where a card is several devices, as an MI250X's two
  GCDs are); the peaks and memory it declares are per device, and every round records and reports it.

Each finding is (problem, fix, severity), as cli/vendor.py's findings are.
"""
from __future__ import annotations

from typing import Optional

SPARSE_SUSPECT = 1.8  # a dense GEMM reaches 55-90 % of a dense peak; a 2:4 sparse figure doubles the peak


def sparse_peaks(hardware: str, peaks: dict[str, float], measured: dict) -> list[tuple[str, str, str]]:
    """Each declared peak far above the GEMM peak calibrated for the same dtype (measured_peaks.yaml)."""
    out = []
    for dtype, declared in sorted(peaks.items()):
        found = measured.get(dtype)
        if found is None or found.under_load:  # a peak measured under load is low for another reason
            continue
        if declared > SPARSE_SUSPECT * found.tflops:
            out.append((f"accelerators.{hardware}.peak_tflops.{dtype} {declared:g} is {declared / found.tflops:.1f}x "
                        f"the {found.tflops:.4g} TFLOP/s its GEMM reached in `accelbench calibrate` ({found.host}, "
                        f"{found.measured_at}): is it a sparse (2:4) datasheet figure? Peaks are dense",
                        f"declare the dense peak (half a 'with sparsity' figure), or calibrate again on an idle "
                        f"device: accelbench calibrate {hardware}", "warning"))
    return out


def device_definition(hardware: str, dies_per_device: Optional[int], devices_per_card: int,
                      on_cpu: bool) -> list[tuple[str, str, str]]:
    """An accelerator that does not state what one device (one rank's) is."""
    if on_cpu or dies_per_device is not None:
        return []
    return [(f"accelerators.{hardware}.dies_per_device is not set: what one device (one rank) is decides every "
             "per-device figure (a two-die card seen as one device doubles them, one die of it halves them)",
             f"state dies_per_device (the dies one device drives) and, where a card shows as several devices, "
             f"devices_per_card; declare peak_tflops and memory_gib per device", "error")]


def device_words(hardware: str, dies_per_device: Optional[int], devices_per_card: int) -> str:
    """``a device of MI250X is 1 die; a card is 2 devices``: what reports say beside per-device figures."""
    if dies_per_device is None:
        return f"a device of {hardware}: not stated (dies_per_device)"
    card = f"; a card is {devices_per_card} devices" if devices_per_card > 1 else ""
    return f"a device of {hardware} is {dies_per_device} die{'s' if dies_per_device > 1 else ''}{card}"

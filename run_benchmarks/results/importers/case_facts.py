"""What the named case and hardware add to an imported log: FLOPs per token, sequence length, precision, peak.

Another tool's log states throughput but rarely the model's FLOPs, and never accelbench's formula. The
import names a case of this checkout (and may name the vendor's extern config), so the same workload
the run path would train resolves here, and the same definitions apply to the imported figures:

    tokens/s total   samples/s x the case's sequence length   (when the log gave samples only)
    TFLOP/s/device   flops_per_token x tokens/s/device / 1e12  (training/contract/flops.py, as a run's)
    MFU              TFLOP/s/device / the vendor's peak for the case's precision

A tool's own TFLOP/s or MFU counts FLOPs its own way; the parsers keep it beside ours under
``*_logged`` names, and it stands in for ours only where the case gives no FLOPs.

Last, every figure passes ``figure_checks.impossible`` against the case's declared peak: a log with a figure
that cannot be (negative or non-finite throughput or step time, MFU over 100 %, TFLOP/s over the peak, a
step faster than its FLOPs at the peak) is stored ``failed`` with each named, and ``import`` exits 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from training.contract import flops
from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.config import Layer, merge, validate_layered
from run_benchmarks.errors import UserError
from run_benchmarks.results.figure_checks import impossible
from run_benchmarks.results.importers import Imported

# Figures any parser may yield; a log that yields none of them gave nothing to store.
FIGURES = ("tokens_per_s_per_device", "tokens_per_s_total", "samples_per_s", "step_time_s", "time_to_train_s",
           "tflops_per_device", "peak_memory_bytes", "peak_memory_reserved_bytes", "loss_last", "eval_accuracy")


@dataclass(frozen=True)
class CaseFacts:
    """The figures' inputs the case and hardware give (None where they give none, and ``notes`` say why)."""

    flops_per_token: Optional[float] = None
    flop_formula: str = ""
    seq_len: Optional[int] = None
    precision: Optional[str] = None
    peak_tflops: Optional[float] = None
    peak_note: str = ""
    memory_total_bytes: Optional[int] = None
    notes: list[str] = field(default_factory=list)


def case_facts(root: Path, name: CaseName, extern_config: Optional[str]) -> CaseFacts:
    """The case's workload (with the extern config's layer when it resolves) and the hardware's peak."""
    from run_benchmarks.catalog.vendors import VendorRegistry

    cases_dir, vendors_dir = root / "cases", root / "vendors"
    catalog = CaseCatalog(cases_dir, vendors_dir)
    case = catalog.resolve(name.case)
    notes: list[str] = []
    hardware = None
    try:
        hardware = VendorRegistry(vendors_dir).find_hardware(name.hardware)
    except UserError as exc:
        notes.append(f"no peak or device memory: {exc.message}")
    layers = [Layer(source, layer) for source, layer in case.layers()]
    if extern_config and hardware is not None:
        try:
            extern = catalog.read_extern(extern_config, hardware.vendor, name.case, name.framework)
            layers += [Layer(source, layer) for source, layer in extern.layers]
        except UserError as exc:
            notes.append(f"the case's own workload used: {exc.message}")
    workload = validate_layered(WorkloadSpec, merge(layers), str(case.path))
    per_token: Optional[float] = None
    formula = ""
    if workload.task == "ppo":
        notes.append("task ppo: its FLOPs are per phase, not per token; no TFLOP/s or MFU")
    else:
        count, formula = flops.flops_per_token(workload.model, workload.train)
        per_token = float(count)
    peak, peak_note = (None, "")
    if hardware is not None:
        peak, peak_note = hardware.peak_tflops(workload.train.precision)
    return CaseFacts(per_token, formula, workload.model.seq_len, workload.train.precision, peak, peak_note,
                     hardware.memory_total_bytes if hardware is not None else None, notes)


def complete(imported: Imported, facts: CaseFacts, world_size: int) -> None:
    """Fills the figures the log left to the case (tokens/s, TFLOP/s, MFU); fails a log with no figure."""
    m = imported.metrics
    if not any(m.get(k) is not None for k in FIGURES):
        if imported.status == "ok" or not imported.reason:
            imported.status, imported.reason = "failed", imported.reason or "no figure in the log"
        elif "no figure" not in imported.reason:
            imported.reason += "; no figure in the log"
        return
    imported.warnings.extend(facts.notes)
    if facts.precision:
        m.setdefault("precision", facts.precision)
    if facts.memory_total_bytes and "memory_total_bytes" not in m:
        m["memory_total_bytes"], m["memory_total_source"] = facts.memory_total_bytes, "declared"
    if m.get("tokens_per_s_total") is None and m.get("samples_per_s") and facts.seq_len:
        m["tokens_per_s_total"] = m["samples_per_s"] * facts.seq_len
    if m.get("tokens_per_s_per_device") is None and m.get("tokens_per_s_total") is not None:
        m["tokens_per_s_per_device"] = m["tokens_per_s_total"] / world_size
    if m.get("tokens_per_s_total") is None and m.get("tokens_per_s_per_device") is not None:
        m["tokens_per_s_total"] = m["tokens_per_s_per_device"] * world_size
    per_device = m.get("tokens_per_s_per_device")
    if facts.flops_per_token and per_device is not None and math.isfinite(per_device):
        m["flops_per_token"], m["flop_formula"] = facts.flops_per_token, facts.flop_formula
        m["tflops_per_device"] = facts.flops_per_token * per_device / 1e12
    elif m.get("tflops_per_device_logged") is not None:
        m["tflops_per_device"] = m["tflops_per_device_logged"]
        m["flop_formula"] = "as the imported tool logged it (the case gives no FLOPs per token)"
    tflops = m.get("tflops_per_device")
    if tflops is not None and facts.peak_tflops:
        m["peak_tflops"], m["mfu"] = facts.peak_tflops, tflops / facts.peak_tflops
        m["mfu_note"] = (f"MFU = {tflops:.4g} / {facts.peak_tflops:g} TFLOP/s ({facts.precision} peak)"
                         + (f"; {facts.peak_note}" if facts.peak_note else ""))
    elif tflops is not None:
        m["mfu_note"] = facts.peak_note or "no peak for this hardware"
    refuse_impossible(imported, facts)


def refuse_impossible(imported: Imported, facts: CaseFacts) -> None:
    """An attempt with a figure that cannot be is failed, its reason naming each figure and its bound
    (``figure_checks``); a non-finite figure is then stored empty (the reason keeps its value)."""
    problems = impossible(imported.metrics, facts.peak_tflops, facts.seq_len)
    if not problems:
        return
    why = "impossible figure(s): " + "; ".join(problems)
    imported.status = "failed"
    imported.reason = f"{imported.reason}; {why}" if imported.reason else why
    for key, value in list(imported.metrics.items()):
        if isinstance(value, float) and not math.isfinite(value):
            imported.metrics[key] = None
        elif isinstance(value, dict):
            imported.metrics[key] = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                                     for k, v in value.items()}

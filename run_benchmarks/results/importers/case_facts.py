"""What the named case and hardware add to an imported log: FLOPs per token, sequence length, precision, peak.

Another tool's log states throughput but rarely the model's FLOPs, and never accelbench's formula. An import
may name a case of this checkout (and the vendor's extern config, and ``--set`` overrides of its workload,
e.g. ``model.seq_len=8192`` for a log whose benchmark trains longer sequences than the case), so the same
workload the run path would train resolves here, and the same definitions apply to the imported figures:

    tokens/s total   samples/s x the sequence length           (when the log gave samples only; the log's
                                                                 own length where it states one, else the
                                                                 case's, said so in a warning)
    TFLOP/s/device   flops_per_token x tokens/s/device / 1e12    (training/contract/flops.py, as a run's)
    MFU              TFLOP/s/device / the vendor's peak for the case's precision

(TFLOP/s, MFU and its note by results/figures/derive.py: the functions a run's round uses, not a copy of them.)

An import that names no case stores the log's own figures only (``hardware_facts``: the declared memory
and nothing else): tokens/s where the log counts tokens or states its sequence length, no TFLOP/s or MFU
of accelbench's formula (they need a case's model, and MFU its precision's peak); a warning says which
figure needs what. A tool's own TFLOP/s or MFU counts FLOPs its own way; the parsers keep it beside ours
under ``*_logged`` names, a warning says where the two differ past ``TOLERANCE``, and it stands in for ours
only where there is no case FLOPs. Every derived figure names its source (``metrics["sources"]``).

Last, every figure passes ``figures.impossible`` against the case's declared peak: a log with a figure
that cannot be (negative or non-finite throughput or step time, MFU over 100 %, TFLOP/s over the peak, a
step faster than its FLOPs at the peak) is stored ``failed`` with each named, and ``import`` exits 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from training.contract.tasks import task_of
from training.contract import flops
from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.config import Layer, merge, parse_assignment, set_source, validate_layered
from run_benchmarks.errors import UserError
from run_benchmarks.results.figures import derive
from run_benchmarks.results.figures.impossible import impossible
from run_benchmarks.results.importers import Imported, crosscheck

# Figures any parser may yield; a log that yields none of them gave nothing to store.
FIGURES = ("tokens_per_s_per_device", "tokens_per_s_total", "samples_per_s", "samples_per_s_per_device",
           "step_time_s", "time_to_train_s", "tflops_per_device", "peak_memory_bytes", "peak_memory_reserved_bytes",
           "loss_last", "eval_accuracy", "samples_per_s_logged", "tflops_per_device_logged")
TOLERANCE = 0.10  # the tool's logged TFLOP/s against accelbench's: past this, a warning names both


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
    case: Optional[str] = None  # None: the import names no case
    seq_source: str = ""  # where seq_len comes from: the case's file, or the --set that overrides it


def case_facts(root: Path, name: CaseName, extern_config: Optional[str],
               assignments: Sequence[str] = ()) -> CaseFacts:
    """The case's workload (with the extern config's layer when it resolves, then ``--set``) and the peak."""
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
    layers += [Layer(set_source(text), parse_assignment(text)) for text in assignments]
    layered = merge(layers)
    workload = validate_layered(WorkloadSpec, layered, str(case.path))
    per_token: Optional[float] = None
    formula = ""
    if task_of(workload.task).phased:
        notes.append("task ppo: its FLOPs are per phase, not per token; no TFLOP/s or MFU")
    else:
        count, formula = flops.flops_per_token(workload.model, workload.train)
        per_token = float(count)
    peak, peak_note = (None, "")
    if hardware is not None:
        peak, peak_note = hardware.peak_tflops(workload.train.precision)
    seq_source = layered.source_of(("model", "seq_len"), str(case.path))
    seq_source = seq_source if seq_source.startswith("--set") else f"case {name.case}"
    return CaseFacts(per_token, formula, workload.model.seq_len, workload.train.precision, peak, peak_note,
                     hardware.memory_total_bytes if hardware is not None else None, notes, name.case, seq_source)


def hardware_facts(root: Path, hardware_name: str) -> CaseFacts:
    """An import of no case: the hardware's declared memory where it is a declared hardware, nothing more."""
    from run_benchmarks.catalog.vendors import VendorRegistry

    notes = ["no case named: only the log's own figures are stored; TFLOP/s and MFU by accelbench's formula "
             "need a case's model (--case-name), tokens/s from samples/s a sequence length (the log's, or a "
             "case's: --case-name, --set model.seq_len=N)"]
    try:
        hardware = VendorRegistry(root / "vendors").find_hardware(hardware_name)
    except UserError:
        notes.append(f"hardware {hardware_name!r} is no declared hardware: no device memory total (name a "
                     "declared one with --hardware)")
        return CaseFacts(notes=notes)
    return CaseFacts(memory_total_bytes=hardware.memory_total_bytes, notes=notes)


def complete(imported: Imported, facts: CaseFacts, world_size: Optional[int], layout: str = "") -> None:
    """Fills the figures the log left to the case (tokens/s, TFLOP/s, MFU), each with its source; fails a log
    with no figure. ``world_size`` None: nothing states the layout, so no per-device figure is derived (and none
    that needs one, TFLOP/s/device and MFU); ``layout`` says where the devices counted come from."""
    m = imported.metrics
    if not any(m.get(k) is not None for k in FIGURES):
        if imported.status == "ok" or not imported.reason:
            imported.status, imported.reason = "failed", imported.reason or "no figure in the log"
        elif "no figure" not in imported.reason:
            imported.reason += "; no figure in the log"
        return
    m["world_size"] = world_size
    if world_size is None:
        m["layout"] = "not stated: filed under a 1 x 1 placeholder, no per-device figure"
        imported.warnings.append("the log states no layout and none was given (--nnodes, --nprocs-per-node): time "
                                 "to train, samples/s and the score are stored, no per-device figure")
    imported.warnings.extend(facts.notes)
    logged_seq = imported.stated.get("seq_len")
    if logged_seq and facts.seq_len and logged_seq != facts.seq_len:
        imported.warnings.append(f"the log's sequence length {logged_seq:,} is not {facts.seq_source}'s "
                                 f"{facts.seq_len:,}: FLOPs per token assume {facts.seq_len:,} (to match the log: "
                                 f"--set model.seq_len={logged_seq})")
    if facts.precision:
        m.setdefault("precision", facts.precision)
    crosscheck.device_memory(imported, facts.memory_total_bytes)  # a logged memory share against the hardware's size
    if facts.memory_total_bytes and "memory_total_bytes" not in m:
        m["memory_total_bytes"], m["memory_total_source"] = facts.memory_total_bytes, "declared"
    _throughput(imported, facts, world_size, f" ({layout})" if layout else "")
    _tflops(imported, facts)
    refuse_impossible(imported, facts)


def _throughput(imported: Imported, facts: CaseFacts, world_size: Optional[int], layout: str) -> None:
    m = imported.metrics
    if world_size is None:
        _tokens_from_samples(imported, facts)
        return
    if m.get("samples_per_s") is None and m.get("samples_per_s_per_device") is not None:
        m["samples_per_s"] = m["samples_per_s_per_device"] * world_size
        imported.source("samples_per_s", f"derived: samples/s per device x {world_size} devices{layout}")
    _tokens_from_samples(imported, facts)
    if m.get("tokens_per_s_per_device") is None and m.get("tokens_per_s_total") is not None:
        m["tokens_per_s_per_device"] = m["tokens_per_s_total"] / world_size
        imported.source("tokens_per_s_per_device", f"derived: tokens/s total / {world_size} devices{layout}")
    if m.get("tokens_per_s_total") is None and m.get("tokens_per_s_per_device") is not None:
        m["tokens_per_s_total"] = m["tokens_per_s_per_device"] * world_size
        imported.source("tokens_per_s_total", f"derived: tokens/s/device x {world_size} devices{layout}")


def _tokens_from_samples(imported: Imported, facts: CaseFacts) -> None:
    """tokens/s from samples/s where the log gives none: the case's sequence length, said to be an assumption."""
    m = imported.metrics
    if m.get("tokens_per_s_total") is None and m.get("tokens_per_s_per_device") is None and m.get("samples_per_s"):
        if imported.stated.get("no_tokens"):  # a recommender's, an image model's samples: no tokens, whatever the case
            imported.warnings.append(f"no tokens/s: {imported.stated['no_tokens']}")
        elif facts.seq_len:
            m["tokens_per_s_total"] = m["samples_per_s"] * facts.seq_len
            imported.source("tokens_per_s_total", f"assumption: samples/s x sequence length {facts.seq_len:,} "
                                                  f"from {facts.seq_source} (the log states none)")
            imported.warnings.append(
                f"sequence length {facts.seq_len:,} from {facts.seq_source}: the log states none, so tokens/s (and "
                + ("TFLOP/s, MFU) rest on the length given" if facts.seq_source.startswith("--set") else
                   "TFLOP/s, MFU) assume the case's; if the run trained other lengths, give them: "
                   "--set model.seq_len=N"))
        else:
            imported.warnings.append("no tokens/s: the log gives samples/s and no sequence length; they need one "
                                     "(a case: --case-name, or --set model.seq_len=N)")


def _tflops(imported: Imported, facts: CaseFacts) -> None:
    """TFLOP/s/device and MFU by the function a run's round uses (results/figures/derive.py), each with its source."""
    m = imported.metrics
    per_device, logged = m.get("tokens_per_s_per_device"), m.get("tflops_per_device_logged")
    if facts.flops_per_token and per_device is not None and math.isfinite(per_device):
        m["flops_per_token"], m["flop_formula"] = facts.flops_per_token, facts.flop_formula
        m["tflops_per_device"] = derive.tflops_per_device(facts.flops_per_token, per_device)
        imported.source("tflops_per_device", f"case {facts.case}: {facts.flops_per_token:,.4g} FLOPs per token "
                                             f"({facts.flop_formula}) x tokens/s/device")
        if logged and m["tflops_per_device"] and abs(logged / m["tflops_per_device"] - 1) > TOLERANCE:
            imported.warnings.append(
                f"TFLOP/s/device: the log's {logged:,.4g} and accelbench's {m['tflops_per_device']:,.4g} "
                f"(case {facts.case}) differ by {logged / m['tflops_per_device'] - 1:+.1%}, past the "
                f"{TOLERANCE:.0%} tolerance: the tool counts FLOPs its own way, or the case is not the model "
                "that ran (--set the case's model to it, or import with no case)")
    elif logged is not None:
        m["tflops_per_device"] = logged
        m["flop_formula"] = "as the imported tool logged it (no case FLOPs per token)"
        imported.source("tflops_per_device", "log: the tool's own TFLOP/s (no case FLOPs per token)")
    tflops = m.get("tflops_per_device")
    if tflops is None:
        return
    used = derive.utilisation(tflops, facts.peak_tflops, facts.precision, facts.peak_note)
    m["mfu_note"] = used.note
    if used.mfu is not None:
        m["peak_tflops"], m["mfu"] = facts.peak_tflops, used.mfu
        imported.source("mfu", f"derived: TFLOP/s/device / the declared {facts.precision} peak "
                               f"{facts.peak_tflops:g} TFLOP/s")


def refuse_impossible(imported: Imported, facts: CaseFacts) -> None:
    """An attempt with a figure that cannot be is failed, its reason naming each figure and its bound
    (``figures.impossible``); a non-finite figure is then stored empty (the reason keeps its value)."""
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

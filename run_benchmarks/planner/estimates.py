"""What the dry run estimates before anything runs: how long a round takes against its deadline, whether the
model's training state fits the device at all, and whether the extern config was written for this device.

Time: steps x global tokens per step / (tokens/s/device x world size). The tokens/s/device comes from a
reference that matches the case (references.yaml, the figure ``--check`` compares with), else from a stated
assumption: ``ASSUMED_MFU`` of the vendor's datasheet peak, through the case's FLOPs per token. Start-up,
compilation and the monitor are not counted, so a round takes longer than this.

Memory: weights + gradients + Adam's states per device, a lower bound (activations, buffers and the
framework's context come on top). Bytes per parameter: mixed precision 2 (fp16/bf16 weights) + 2 (gradients)
+ 12 (fp32 master weights and two moments); fp32 4 + 4 + 8: 16 either way. Tensor x pipeline parallel split
all three; ZeRO sharding splits the optimizer states (stage1), + gradients (stage2), + weights (stage3) over
the sharding degree. Plain 8-way data parallel of 6.7B parameters: 6.7e9 x 16 B = 107 GB on every device.
Only full training (pretrain, finetune) is estimated: LoRA, PPO and micro-benchmarks keep other states.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from training.contract import batch, flops

from run_benchmarks.catalog.vendors import accelerator_in_config_name
from run_benchmarks.plan import CasePlan
from run_benchmarks.results.checks.references import load_references

ASSUMED_MFU = 0.40  # a stated assumption, not a measurement: a reference replaces it
SHOWN_CONFIGS = 4


@dataclass(frozen=True)
class Estimate:
    notes: list[str]  # what was estimated, with its formula and source
    warnings: list[str]  # the round will pass its deadline, the plan cannot fit the device, ...


def _state_bytes(case: CasePlan) -> tuple[float, str]:
    """Weights + gradients + Adam states per device (bytes), with the formula in words."""
    w = case.workload
    params = flops.total_params(w.model)
    weight, grad, optim = (4, 4, 8) if w.train.precision == "fp32" else (2, 2, 12)
    p = w.parallel
    model_split = p.tensor_parallel_degree * p.pipeline_parallel_degree
    shards = p.sharding_parallel_degree or p.data_degree(case.name.world_size)
    stage = {"none": 0, "stage1": 1, "stage2": 2, "stage3": 3}[p.sharding]
    per_param = (weight / (shards if stage >= 3 else 1) + grad / (shards if stage >= 2 else 1)
                 + optim / (shards if stage >= 1 else 1))
    formula = (f"{params / 1e9:.3g}B parameters x ({weight} weights + {grad} grads + {optim} Adam states) B"
               + (f" / {model_split} (tensor x pipeline)" if model_split > 1 else "")
               + (f", sharding {p.sharding} over {shards}" if stage else ", no sharding"))
    return params * per_param / model_split, formula


def _reference_speed(case: CasePlan) -> Optional[tuple[float, str]]:
    config = case.extern_config.stem if case.extern_config else None
    cases_dir, vendor_dir = case.case_file.parent.parent, case.hardware.vendor_dir
    for ref, source in load_references(cases_dir, vendor_dir.parent, case.name.case, case.hardware.vendor,
                                       vendor_dir=vendor_dir):
        tol = ref.figures.get("tokens_per_s_per_device")
        if tol and (ref.case in (None, case.name.case) and ref.hardware == case.hardware.name
                    and ref.framework in (None, case.framework.name)
                    and ref.nnodes in (None, case.name.nnodes) and ref.nprocs_per_node in (None, case.name.nprocs_per_node)
                    and ref.extern_config in (None, config)):
            return tol.value, f"the reference in {source}"
    return None


def _assumed_speed(case: CasePlan) -> Optional[tuple[float, str]]:
    peak, _ = case.hardware.peak_tflops(case.workload.train.precision)
    if not peak:
        return None
    per_token, _ = flops.flops_per_token(case.workload.model, case.workload.train)
    return (ASSUMED_MFU * peak * 1e12 / per_token,
            f"an assumed {ASSUMED_MFU:.0%} MFU of {case.hardware.name}'s {peak:g} TFLOP/s datasheet peak "
            f"(no reference for this case: add one to references.yaml)")


def shipped_configs(case: CasePlan) -> list[Path]:
    """The vendor's extern configs for the case, this framework's first (another framework's are named too)."""
    folder = case.hardware.vendor_dir / case.name.case
    found = sorted(folder.glob("*/config_*")) if folder.is_dir() else []
    return sorted(found, key=lambda p: p.parent.name != case.framework.name)


def estimate(case: CasePlan) -> Estimate:
    notes: list[str] = []
    warnings: list[str] = []
    w = case.workload
    if w.task not in ("pretrain", "finetune"):
        return Estimate([f"time and memory not estimated for task {w.task}"], [])
    world = case.name.world_size
    step_tokens = batch.tokens_per_step(w, world)
    speed = _reference_speed(case) or _assumed_speed(case)
    if speed is None:
        notes.append("round time not estimated: no reference for this case and no datasheet peak")
    else:
        per_device, source = speed
        seconds = w.train.steps * step_tokens / (per_device * world)
        notes.append(f"round time ≈ {w.train.steps} steps x {step_tokens:,} tokens / ({per_device:,.0f} tokens/s/device "
                     f"x {world}) = {seconds / 60:,.1f} min, start-up not counted; tokens/s from {source}")
        if seconds > case.timeout_s:
            warnings.append(f"the round's estimated {seconds / 60:,.1f} min pass its deadline of "
                            f"{case.timeout_s / 60:,.1f} min (timeout_s {case.timeout_s:g}): raise timeout_s "
                            "(--timeout) or lower train.steps")
    total = case.hardware.spec.memory_gib
    if not case.hardware.on_cpu and not w.parallel.offload:
        need, formula = _state_bytes(case)
        notes.append(f"training state per device ≥ {need / 1e9:,.1f} GB: {formula}; activations on top")
        if total and need > total * 2**30:
            warnings.append(f"the plan cannot fit {case.hardware.name}'s {total:g} GiB: weights, gradients and Adam "
                            f"states alone take {need / 1e9:,.1f} GB per device ({formula})")
    if case.extern_config is None and warnings:
        configs = shipped_configs(case)
        if configs:
            names = ", ".join(f"{p.parent.name}/{p.name}" for p in configs[:SHOWN_CONFIGS]) + \
                (" ..." if len(configs) > SHOWN_CONFIGS else "")
            warnings.append(f"{case.hardware.vendor} ships {len(configs)} config(s) for {case.name.case} in "
                            f"{configs[0].parent.parent}: {names} (--extern-config NAME, with that framework)")
    if case.extern_config is not None:
        stated = accelerator_in_config_name(case.extern_config.stem, case.hardware.vendor_spec)
        other = case.hardware.vendor_spec.accelerators.get(stated) if stated else None
        if other is not None and stated != case.hardware.name and other.memory_gib != total:
            warnings.append(f"extern config {case.extern_config.name} was written for {stated} "
                            f"({other.memory_gib:g} GiB); this plan runs it on {case.hardware.name} ({total:g} GiB): "
                            "its batch and recompute settings were sized for the other memory")
    return Estimate(notes, warnings)

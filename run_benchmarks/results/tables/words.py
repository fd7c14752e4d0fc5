"""A stored workload's setup in a reader's words, as the reference tables print it: the layout in each
framework's own terms (``MP4 + recompute`` for Paddle, ``ZeRO-2 x4`` for torch), the micro batch, precision,
compile mode and selective recompute, and the case name it ran as. Read from the layout facts and settings the
round stored (report/facts.py); nothing is derived again here."""
from __future__ import annotations

from typing import Optional

from training.contract.spec import TrainSpec

from run_benchmarks.results.report.summary import CaseSummary


def recompute_every(facts: dict) -> int:
    """Selective recompute's k (every k-th block), the schema's default where the stored workload omits it."""
    return int(facts.get("train.recompute_every") or TrainSpec.model_fields["recompute_every"].default)


def layout(summary: Optional[CaseSummary]) -> str:
    """``MP4 + recompute`` (Paddle), ``ZeRO-2 x4`` (torch), ``DP8``, ``1 device``; the extern config's name
    where the round stored no workload."""
    if summary is None:
        return "-"
    f = summary.facts
    if summary.workload_hash is None or "tensor_parallel" not in f:
        return summary.config
    paddle = summary.key["framework"] == "paddle"
    parts = []
    if (f.get("tensor_parallel") or 1) > 1:
        parts.append(f"{'MP' if paddle else 'TP'}{f['tensor_parallel']}")
    if (f.get("pipeline_parallel") or 1) > 1:
        parts.append(f"PP{f['pipeline_parallel']}")
    stage = str(f.get("sharding") or "none")
    if stage != "none":
        n = stage.removeprefix("stage")
        parts.append(f"{'sharding stage' if paddle else 'ZeRO-'}{n} x{f.get('sharding_degree')}")
    elif (f.get("data_parallel") or 1) > 1:
        parts.append(f"DP{f['data_parallel']}")
    if f.get("offload"):
        parts.append("offload")
    recompute = f.get("recompute")
    if recompute == "selective":
        parts.append(f"recompute 1/{recompute_every(f)}")
    elif recompute not in (None, "none"):
        parts.append("recompute")
    return " + ".join(parts) or "1 device"


def setup(summary: Optional[CaseSummary]) -> str:
    """The layout with the micro batch, precision (Paddle's AMP level) and compile mode."""
    words = layout(summary)
    if summary is None or summary.workload_hash is None or "tensor_parallel" not in summary.facts:
        return words  # "-", or the extern config's name
    f = summary.facts
    amp = f" {f['train.amp_level']}" if summary.key["framework"] == "paddle" and f.get("train.amp_level") else ""
    compiled = f", compile {f['train.compile']}" if f.get("train.compile") else ""
    return f"{words}, micro batch {f.get('micro_batch_size')}, {f.get('precision')}{amp}{compiled}"


def run_words(summary: CaseSummary) -> str:
    """What ran: the case name, its extern config where it had one, and the setup."""
    config = f" {summary.config}" if summary.config not in ("", "-") else ""
    return f"{summary.label}{config}: {setup(summary)}"

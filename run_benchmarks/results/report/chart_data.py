"""What the report charts plot, read from stored summaries: row labels, colour keys, loss curves.

Kept apart from charts.py (the drawing) so the two stay small and the data rules can be read on their own.
The store keeps per-round figures and the step-time series, but not the loss of every step; the loss curve
of a round is read back from its rank-0 log beside the stored ``results_path`` while that log still exists,
and the chart is left out where it does not.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional, Sequence

from training.contract.batch import world_size

from run_benchmarks.catalog.compliance import NON_COMPLIANT
from run_benchmarks.results.worker_logs import perf_reader
from run_benchmarks.results.worker_logs.rank_files import gathered
from run_benchmarks.results.report.summary import CaseSummary

LOSS_POINTS = 512  # a long run's loss curve is thinned to about this many points (bucket means)


def devices(s: CaseSummary) -> int:
    return world_size(int(s.key["nnodes"]), int(s.key["nprocs_per_node"]))


def varying_facts(summaries: Sequence[CaseSummary]) -> list[str]:
    """The layout and batch facts that tell these rows apart (none where summaries carry no facts)."""
    try:
        from run_benchmarks.results.report.facts import varying_settings
    except ImportError:  # an accelbench without stored workloads: rows are told apart by their labels
        return []
    return varying_settings([s for s in summaries if hasattr(s, "facts")])


def label_facts(summaries: Sequence[CaseSummary]) -> list[str]:
    """The differing facts worth a chart label, fewer than a table's columns: global tokens go where global
    batch in samples already differs (one model: the same ratio), and the data-parallel degree where it
    equals every row's device count (``1x2`` says it already)."""
    keys = varying_facts(summaries)
    if "global_batch_samples" in keys and "global_batch_tokens" in keys:
        keys.remove("global_batch_tokens")
    if "data_parallel" in keys and all(getattr(s, "facts", {}).get("data_parallel") == devices(s) for s in summaries):
        keys.remove("data_parallel")
    return keys


def fact_words(s: CaseSummary, keys: Sequence[str]) -> str:
    if not keys:
        return ""
    from run_benchmarks.results.report.facts import describe

    return describe(getattr(s, "facts", {}), keys)


def row_label(s: CaseSummary, varying: Sequence[str], with_case: bool = False, width: int = 42) -> str:
    """``torch_2.13 cpu 1x2`` (+ config and the facts that differ), wrapped to ``width`` characters so a long
    extern config name never pushes the plot off its figure."""
    k = s.key
    version = f"_{k['framework_version']}" if k.get("framework_version") else ""
    parts = ([str(k["case"])] if with_case else []) + [f"{k['framework']}{version}", str(k["hardware"]),
                                                         f"{k['nnodes']}x{k['nprocs_per_node']}"]
    if s.config != "-":
        parts.append(s.config)
    words = fact_words(s, varying)
    text = " ".join(parts) + (f" ({words})" if words else "")
    if s.non_compliant:  # a bar beside compliant ones ranks it: the label says it departs from its case's policy
        text += f" [{NON_COMPLIANT}]"
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=True)) or text


def colour_key(s: CaseSummary) -> str:
    """Bars and lines are coloured by framework on hardware (the vendor's accelerator), the same colour in
    every chart of a page."""
    return f"{s.key['framework']} on {s.key['hardware']}"


def by_case(summaries: Sequence[CaseSummary]) -> dict[str, list[CaseSummary]]:
    out: dict[str, list[CaseSummary]] = {}
    for s in summaries:
        out.setdefault(str(s.key["case"]), []).append(s)
    return out


def _thin(points: list[tuple[float, float]], limit: int = LOSS_POINTS) -> list[tuple[float, float]]:
    if len(points) <= limit:
        return points
    size = -(-len(points) // limit)
    return [(sum(p[0] for p in chunk) / len(chunk), sum(p[1] for p in chunk) / len(chunk))
            for chunk in (points[i:i + size] for i in range(0, len(points), size))]


def _rank0_log(results_path: str) -> Optional[Path]:
    folder = Path(results_path).parent
    if not folder.is_dir():
        return None
    for nodes in ("*noderank0", "*"):  # the launchers' gathered layout (results/worker_logs/rank_logs.py)
        rank0 = next((logs for logs in gathered(folder, nodes) if logs.rank == 0), None)
        if rank0 is not None:
            return rank0.stdout
    return None


def loss_series(s: CaseSummary) -> list[tuple[float, float]]:
    """(step, loss) of the first ok round, warm-up steps included: the round's stored ``loss_series`` where
    a newer record carries one, else its rank-0 log; empty where neither is there (an import, moved logs)."""
    for attempt in s.ok[:1]:
        stored = (attempt.get("metrics") or {}).get("loss_series")
        if stored:
            return [(float(x), float(y)) for x, y in stored]
        log = _rank0_log(attempt.get("results_path") or "") if attempt.get("results_path") else None
        if log is None:
            return []
        points, problems = [], []
        for batch in perf_reader.read_batches(log, problems):
            points += [(float(p["step"]), float(p["loss"])) for p in batch
                       if isinstance(p, dict) and p.get("kind") == "step" and p.get("loss") is not None]
        return _thin(sorted(points))
    return []

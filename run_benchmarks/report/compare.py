"""A against B: per matching case, both figures and B's speedup over A, like the published
PaddleNLP-vs-Torch tables (``+32%``: B does 32% more tokens/s than A).

A side is a run (id, prefix or ``last``) or filters such as ``framework=paddle``. Cases match on
case, framework, hardware, layout and extern config name, less the fields the two sides' filters
set differently: ``framework=paddle`` against ``framework=torch`` matches each case's Paddle run
with its Torch run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..store import Attempt
from .summary import FIGURE_BY_KEY, CaseSummary, summarize

MATCH_FIELDS = ("case", "framework", "hardware", "nnodes", "nprocs_per_node", "extern_config")
COMPARED = ("tokens_per_s_per_device", "tflops_per_device", "mfu", "peak_memory_bytes")
SHORT = {"tokens_per_s_per_device": "tok/s/dev", "tflops_per_device": "TFLOP/s/dev", "mfu": "MFU",
         "peak_memory_bytes": "peak mem"}


@dataclass(frozen=True)
class Selection:
    text: str
    run_ids: tuple[str, ...]
    filters: dict


@dataclass(frozen=True)
class Row:
    key: dict
    a: Optional[CaseSummary]
    b: Optional[CaseSummary]

    def change(self, figure: str) -> Optional[float]:
        """B / A - 1 for a figure both sides have."""
        va = self.a.mean(figure) if self.a else None
        vb = self.b.mean(figure) if self.b else None
        if va is None or vb is None or va == 0:
            return None
        return vb / va - 1

    @property
    def label(self) -> str:
        k = self.key
        parts = [str(k[f]) for f in ("case", "framework", "hardware") if f in k]
        if "nnodes" in k:
            parts.append(f"{k['nnodes']}x{k['nprocs_per_node']}")
        if k.get("extern_config") not in (None, "-"):
            parts.append(str(k["extern_config"]))
        return " ".join(parts)


def match_fields(a: Selection, b: Selection) -> tuple[str, ...]:
    differ = {key for key in set(a.filters) | set(b.filters) if a.filters.get(key) != b.filters.get(key)}
    if "framework" in differ:  # each framework keeps its configs in its own folder, under the same names
        differ.discard("extern_config")
    return tuple(f for f in MATCH_FIELDS if f not in differ)


def compare(a: Selection, b: Selection, a_attempts: Sequence[Attempt], b_attempts: Sequence[Attempt]) -> list[Row]:
    fields = match_fields(a, b)
    left = {tuple(s.key[f] for f in fields): s for s in summarize(a_attempts, fields)}
    right = {tuple(s.key[f] for f in fields): s for s in summarize(b_attempts, fields)}
    keys = list(left) + [k for k in right if k not in left]
    return [Row(dict(zip(fields, k)), left.get(k), right.get(k)) for k in keys]


def format_change(row: Row, figure: str) -> str:
    change = row.change(figure)
    if change is None:
        return "n/a"
    return f"{change:+.0%}" if abs(change) >= 0.005 else f"{change:+.1%}"


def format_value(summary: Optional[CaseSummary], figure: str) -> str:
    if summary is None:
        return "(no run)"
    value = summary.mean(figure)
    if value is None and not summary.ok:  # say why there is no figure
        return "n/a (" + ", ".join(f"{n} {s}" for s, n in summary.statuses.items()) + ")"
    if value is None:
        return "n/a"
    return FIGURE_BY_KEY[figure].fmt(value)

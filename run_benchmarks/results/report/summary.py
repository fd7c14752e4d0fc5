"""Stored attempts -> one summary per case: each figure's mean and spread over the ok rounds.

This is the last level of the aggregation (step -> rank -> device -> node -> round -> case); the
levels below happen in figures/analyze.py when a round ends. Every report format reads these summaries.

Rounds share a summary only when they ran the same workload: the hash of the resolved workload each round
stored (report/facts.py). Micro batch 4 and 16, or fp32 and bf16, are two rows, never one mean of both. A
row without a stored workload (older imports) falls back to the case columns (KEY_FIELDS).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from run_benchmarks.results.figures import contention, memory, noise
from run_benchmarks.results.report import compliance_marks, current_peaks
from run_benchmarks.results.figures.analyze import CV_FLAG, Stats
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.report.facts import RoundFacts, flat_settings, round_facts, settings_key


@dataclass(frozen=True)
class Figure:
    key: str  # attempts column
    label: str
    unit: str
    higher_is_better: bool
    fmt: Callable[[float], str]


def number(x: Optional[float], digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:,.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"


def human_bytes(n: Optional[float]) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


FIGURES = (
    Figure("tokens_per_s_per_device", "tokens/s/device", "tok/s", True, number),
    Figure("tokens_per_s_total", "tokens/s total", "tok/s", True, number),
    Figure("effective_tokens_per_s_per_device", "effective tokens/s/device (no padding)", "tok/s", True, number),
    Figure("samples_per_s", "samples/s", "samples/s", True, number),
    Figure("tflops_per_device", "TFLOP/s/device (model)", "TFLOP/s", True, lambda x: f"{x:.3g}"),
    Figure("mfu", "MFU", "", True, lambda x: f"{x:.1%}"),
    Figure("mfu_measured", "MFU (measured)", "", True, lambda x: f"{x:.1%}"),
    # an older row against the GEMM peak calibrated since it ran (report/current_peaks.py), beside its stored MFU
    Figure("mfu_current_peak", "MFU (peak calibrated since)", "", True, lambda x: f"{x:.1%}"),
    Figure("peak_memory_bytes", "peak memory/device", "B", False, human_bytes),
    Figure("step_time_median_s", "step time (median)", "s", False, lambda x: f"{x * 1e3:.1f} ms"),
    Figure("init_time_s", "init time", "s", False, lambda x: f"{x:.1f} s"),
    Figure("first_step_time_s", "first step", "s", False, lambda x: f"{x:.2f} s"),
    Figure("wall_time_s", "end-to-end", "s", False, lambda x: f"{x:.1f} s"),
    Figure("loss_last", "loss at the end", "", False, lambda x: f"{x:.4f}"),
    # MLPerf's own result, for imported MLPerf logs: its score and the quality metric it reached
    Figure("time_to_train_s", "time to train", "s", False, lambda x: f"{x:,.1f} s ({x / 60:,.1f} min)"),
    Figure("eval_accuracy", "eval accuracy (last)", "", True, lambda x: f"{x:.4g}"),
    Figure("accel_util_mean", "accelerator utilisation", "%", True, lambda x: f"{x:.0f}%"),
    Figure("power_w_mean", "power (all devices)", "W", False, lambda x: f"{x:,.0f} W"),
    Figure("energy_j", "energy (all devices)", "J", False, lambda x: f"{x:,.0f} J"),
    Figure("tokens_per_joule", "tokens/J", "tok/J", True, lambda x: f"{x:,.4g}"),
)
FIGURE_BY_KEY = {f.key: f for f in FIGURES}
KEY_FIELDS = ("case", "framework", "framework_version", "hardware", "vendor", "nnodes", "nprocs_per_node",
              "extern_config")


def config_name(path: Optional[str]) -> str:
    """``config_TP2PP1SH1SP1cpux1x2`` from a stored extern config path; ``-`` without one."""
    return Path(path).stem if path else "-"


@dataclass
class CaseSummary:
    key: dict
    attempts: list[Attempt]
    figures: dict[str, Stats] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    what: RoundFacts = RoundFacts(None, None)  # the workload hash and layout facts its rounds share
    # every quality metric an imported MLPerf log's rules score, by name (Stable Diffusion: FID and CLIP),
    # where there are several: the eval accuracy cell shows them all, never only the first
    scored: dict[str, Stats] = field(default_factory=dict)
    current_peak_note: str = ""  # what mfu_current_peak divides by (report/current_peaks.py), when it is set

    @property
    def facts(self) -> dict:
        """The layout facts, and every other workload setting under its dotted name (``train.steps``)."""
        return {**flat_settings(self.what.spec), **self.what.facts}

    @property
    def workload_hash(self) -> Optional[str]:
        return self.what.workload_hash

    @property
    def non_compliant(self) -> bool:
        """Whether a round of this workload departs from its case's policy (report/compliance_marks.py)."""
        return compliance_marks.departs(self.attempts)

    @property
    def statuses(self) -> Counter:
        return Counter(a["status"] for a in self.attempts)

    @property
    def ok(self) -> list[Attempt]:
        return [a for a in self.attempts if a.ok]

    @property
    def label(self) -> str:
        k = self.key
        version = f"_{k['framework_version']}" if k.get("framework_version") else ""
        return f"{k['case']}:{k['framework']}{version}:{k['hardware']}:{k['nnodes']}:{k['nprocs_per_node']}"

    @property
    def config(self) -> str:
        """The extern config name(s) its rounds used: one workload run from two files shows both."""
        names = dict.fromkeys(config_name(a.get("extern_config")) for a in self.attempts)
        return ", ".join(names) if names else config_name(self.key.get("extern_config"))

    def mean(self, key: str) -> Optional[float]:
        stats = self.figures.get(key)
        return stats.mean if stats else None

    def cell(self, key: str) -> str:
        """The figure's mean over ok rounds, with its coefficient of variation when there are several."""
        if key == "eval_accuracy" and len(self.scored) > 1:
            fmt = FIGURE_BY_KEY[key].fmt
            return "; ".join(f"{name} {fmt(st.mean)}" + (f" ±{st.cv:.1%}" if st.n > 1 else "")
                             for name, st in self.scored.items())
        stats = self.figures.get(key)
        if stats is None:
            return "n/a"
        fmt = FIGURE_BY_KEY[key].fmt if key in FIGURE_BY_KEY else human_bytes  # the memory definitions
        return fmt(stats.mean) + (f" ±{stats.cv:.1%}" if stats.n > 1 else "")

    def memory(self) -> str:
        """Peak memory per device as actual / total, as the FlagPerf GPT-3 tables print it, saying which
        definition (results/figures/memory.py, the same one every view shows for this row); the total is the vendor's
        declared device memory where it declares one."""
        chosen = self.memory_figure
        total = self.figures.get("memory_total_bytes")
        if chosen is None:
            return "n/a"
        return human_bytes(chosen.value) + (f" / {human_bytes(total.max)}" if total else "") + f" ({chosen.name})"

    @property
    def memory_figure(self) -> Optional[memory.MemoryFigure]:
        """The row's memory figure (the max over its ok rounds) in the definition every view shows."""
        return memory.headline(lambda key: self.figures[key].max if key in self.figures else None,
                               self.peak_kind)

    @property
    def memory_keys(self) -> list[str]:
        """The memory definitions this row has, in the order views prefer them."""
        return [f.key for f in memory.figures(lambda key: self.figures[key].max if key in self.figures else None,
                                              self.peak_kind)]

    @property
    def memory_definitions(self) -> list[tuple[str, str]]:
        """(key, name) of each memory definition this row has, in view order: what ``compare`` matches on."""
        return [(f.key, f.name) for f in memory.figures(
            lambda key: self.figures[key].max if key in self.figures else None, self.peak_kind)]

    @property
    def memory_kind(self) -> str:
        chosen = self.memory_figure
        return chosen.name if chosen else self.peak_kind or "peak"

    @property
    def peak_kind(self) -> Optional[str]:
        """The worker's own peak's name (``allocated``, ``rss``, an import's), as its first ok round stored it."""
        metrics = next((a.get("metrics") for a in self.ok if a.get("metrics")), None) or {}
        return metrics.get("memory_kind")

    @property
    def environment(self) -> dict:
        """The first ok attempt's environment (every round of a case ran on the same hosts and image)."""
        for a in self.ok or self.attempts:
            return a.get("environment") or {}
        return {}

    @property
    def contended(self) -> list[str]:
        """``round 2: others used 63% ...`` per contended ok round: such a row is not judged (compare, --check)."""
        return contention.contended_rounds(self.ok)

    def contention_cell(self) -> str:
        return contention.cell(self.ok)

    def log_se(self, key: str) -> Optional[float]:
        """The standard error of the figure's mean on the log scale (results/figures/noise.py), None when unknown."""
        values = [v for v in (_value(a, key) for a in self.ok) if v is not None]
        rounds = [((a.get("metrics") or {}).get("rate_noise") or {}).get("log_se") for a in self.ok
                  if _value(a, key) is not None]
        return noise.side_log_se(key, values, rounds) if values else None

    @property
    def batch_size(self) -> Optional[int]:
        value = self.mean("samples_per_step")
        return int(value) if value else None


def case_key(attempt: Attempt, fields: Sequence[str] = KEY_FIELDS) -> tuple:
    return tuple(config_name(attempt.get(f)) if f == "extern_config" else attempt.get(f) for f in fields)


def group_key(attempt: Attempt, what: RoundFacts, fields: Sequence[str] = KEY_FIELDS) -> tuple:
    """The workload hash (with the vendor, whose references apply) where the round stored its workload;
    else ``fields`` of the row, as before workloads were stored, with an import's ``--set`` overrides."""
    if what.workload_hash is not None:
        return ("workload", what.workload_hash, attempt.get("vendor"))
    return ("case",) + case_key(attempt, fields) + settings_key(what.facts)


def summarize(attempts: Sequence[Attempt], fields: Sequence[str] = KEY_FIELDS) -> list[CaseSummary]:
    """Group by workload hash (``fields`` for rows without a workload), in first-seen order, and aggregate
    every figure over the ok attempts. ``key`` holds ``fields`` of the group's first row."""
    groups: dict[tuple, tuple[RoundFacts, list[Attempt]]] = {}
    for attempt in attempts:
        what = round_facts(attempt)
        groups.setdefault(group_key(attempt, what, fields), (what, []))[1].append(attempt)
    out = []
    for what, members in groups.values():
        summary = CaseSummary(dict(zip(fields, case_key(members[0], fields))), members, what=what)
        summary.flags += [what.note] if what.note else []
        summary.flags += untrained_flags(members)
        summary.flags += compliance_marks.flags(members)  # each departure from the case's policy, named
        noisy = []  # (label, cv): throughput, TFLOP/s and MFU scale together, so one flag names them all
        for name in [f.key for f in FIGURES] + ["samples_per_step", "memory_total_bytes", "peak_memory_reserved_bytes",
                                               "device_memory_used_bytes"]:
            values = [v for v in (_value(a, name) for a in summary.ok) if v is not None]
            stats = Stats.of(values)
            if stats is None:
                continue
            summary.figures[name] = stats
            figure = FIGURE_BY_KEY.get(name)
            if figure and stats.n > 1 and stats.cv > CV_FLAG and name in FLAGGED:
                noisy.append((figure.label, stats.cv))
        _scored(summary)
        if noisy:
            summary.flags.append(f"varies across {len(summary.ok)} rounds (> {CV_FLAG:.0%}): "
                                 + ", ".join(f"{label} {cv:.1%}" for label, cv in noisy))
        summary.flags += [f"contended, not judged: {line}" for line in summary.contended]
        out.append(summary)
    return out


def _scored(summary: CaseSummary) -> None:
    """Each scored metric's stats over the ok rounds, and a flag where the log stated no layout."""
    names: dict[str, list[float]] = {}
    for attempt in summary.ok:
        metrics = attempt.get("metrics") or {}
        for name, value in (metrics.get("eval_metrics") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                names.setdefault(name, []).append(value)
    summary.scored = {name: Stats.of(values) for name, values in names.items()}
    if any(str((a.get("metrics") or {}).get("layout", "")).startswith("not stated") for a in summary.attempts):
        summary.flags.append("the log states no layout and none was given: its nodes and devices (1:1) are a "
                             "placeholder, and no per-device figure is stored")


def untrained_flags(attempts: Sequence[Attempt]) -> list[str]:
    """An imported round that trained nothing (importers/untrained.py): one flag line per round, its causes named,
    so no view shows the row as a plain result."""
    out = []
    for attempt in attempts:
        causes = (attempt.get("metrics") or {}).get("trained_nothing")
        if causes:
            out.append(f"round {attempt.get('round')} trained nothing (flag trained_nothing, status "
                       f"{attempt.get('status')}): " + "; ".join(map(str, causes)))
    return out


def _value(attempt: Attempt, name: str) -> Optional[float]:
    """A figure of a round: its store column, else its metrics (figures no column holds, e.g. mfu_measured)."""
    value = attempt.get(name)
    if value is None and name not in ("wall_time_s",):
        value = (attempt.get("metrics") or {}).get(name)
    return value if isinstance(value, (int, float)) else None


FLAGGED = ("tokens_per_s_per_device", "tokens_per_s_total", "tflops_per_device", "mfu", "step_time_median_s")

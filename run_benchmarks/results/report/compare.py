"""A against B: per matching workload, both figures with their rounds and spread, and B's speedup over A,
like the published PaddleNLP-vs-Torch tables (``+32%``: B does 32% more tokens/s than A).

A side is a run (id, prefix or ``last``) or filters such as ``framework=paddle``. Each side is first
summarized per workload (report/summary.py: rounds of one workload hash only). Rows then pair on what ran,
never on file names: the case, framework and version, hardware, the model and the layout and batch facts
(report/facts.py: parallel degrees, sharding, micro batch, accumulation, global batch, precision, data
source, nodes x processes), less the keys the two sides' filters set differently: ``hardware=A100
hardware=X1`` pairs two vendors' identical layouts whatever their extern configs are called, and
``framework=paddle framework=torch`` pairs each layout's Paddle run with its Torch run. Rows without a
stored workload (older imports) pair as before, on the case columns and extern config name.

Rows that pair on nothing above (two runs, micro batch 4 and 8) pair when their settings differ in exactly
one (the flattened workload plus the case columns): the row says which setting, ``train.micro_batch_size
4/8``. A side may also filter on a layout fact (``micro_batch_size=4``; FACT_FILTERS), which the pairing then
drops with the facts it implies (the global batch). Two sides with no pair at all are "nothing in common":
``pairing.nothing_in_common`` says so once, with the closest pairs and what differs in each.

The figures are COMPARED's, then MLPerf's time to train and last eval accuracy where a side has them.

A side that departs from its case's policy is named in the row's label and beside every change
(``+12% (B non-compliant)``; report/compliance_marks.py): a comparison is never shown without saying so.

Noise: every change has its 95 % interval, from each side's steps resampled and its rounds' spread
(results/figures/noise.py), one round against one round included; "within noise" where it holds 0, otherwise a
regression or an improvement by the figure's direction (NOISE_RULE). A pair with a contended round on a side
judges nothing: every change reads "not judged: contended" and the row names the contention.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import zip_longest
from typing import Optional, Sequence

from run_benchmarks.results.figures import memory, noise
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.report.facts import FACT_LABEL, MATCH_FACTS, differing, fact_text, settings_key
from run_benchmarks.results.report.pairing import CASE_SETTINGS, pair_by_one_setting, setting_differences
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary, summarize

# Rows without a stored workload pair as before workloads were stored:
MATCH_FIELDS = ("case", "framework", "hardware", "nnodes", "nprocs_per_node", "extern_config")
WORKLOAD_MATCH = ("case", "framework", "framework_version", "hardware", "model") + MATCH_FACTS
# A filter the two sides set differently drops these keys from the match (they are what the compare varies).
DROPPED_BY = {"framework": ("framework", "framework_version"), "framework_version": ("framework_version",),
              "hardware": ("hardware",), "vendor": ("hardware",), "case_name": ("framework", "framework_version",
                                                                                  "hardware", "nnodes",
                                                                                  "nprocs_per_node"),
              # a layout fact the sides filter differently also changes the facts derived from it
              "micro_batch_size": ("global_batch_samples", "global_batch_tokens"),
              "gradient_accumulation_steps": ("global_batch_samples", "global_batch_tokens"),
              "data_parallel": ("global_batch_samples", "global_batch_tokens"),
              "seq_len": ("global_batch_tokens", "model")}
# Layout facts a side may filter on besides the store's columns (report/facts.py computes them per round).
FACT_FILTERS = tuple(k for k in MATCH_FACTS if k not in ("nnodes", "nprocs_per_node", "precision"))
# "memory" is the memory definition both sides have (results/figures/memory.py: device in use, reserved, the worker's
# peak), named in the row: two definitions are never compared with each other
COMPARED = ("tokens_per_s_per_device", "tflops_per_device", "mfu", "memory")
# MLPerf's score and its quality metric (an imported result log's): compared where a side has them (compared()).
HEADLINE = ("time_to_train_s", "eval_accuracy")
SHORT = {"tokens_per_s_per_device": "tok/s/dev", "tflops_per_device": "TFLOP/s/dev", "mfu": "MFU",
         "memory": "memory", "time_to_train_s": "time to train", "eval_accuracy": "eval accuracy (last)",
         "samples_per_s": "samples/s"}
NOISE_RULE = "B vs A with its 95 % interval (steps resampled, rounds' spread); within noise where the interval holds 0"
NOT_JUDGED = "not judged: contended"


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
    varying: tuple[str, ...] = ()  # facts that differ between the compare's rows: named in the label
    differs: tuple[str, ...] = ()  # the workload settings A and B differ in, "train.micro_batch_size 4/8"

    def key_of(self, figure: str) -> Optional[str]:
        """The figure's store key; for ``memory`` the first definition both sides have (None: none in common)."""
        if figure != "memory":
            return figure
        if self.a is not None and self.b is not None:
            return memory.common_key(self.a.memory_definitions, self.b.memory_definitions)
        keys = (self.a or self.b).memory_keys if (self.a or self.b) else []
        return keys[0] if keys else None

    def figure_label(self, figure: str) -> str:
        """``memory (device in use)``: the memory row names its definition."""
        if figure != "memory":
            return SHORT.get(figure, figure)
        key, side = self.key_of(figure), self.a or self.b
        if key is None:
            return "memory (no definition in common)" if self.a and self.b else "memory"
        return f"memory ({memory.name_of(key, side.peak_kind if key == memory.PEAK else None)})"

    def change(self, figure: str) -> Optional[float]:
        """B / A - 1 for a figure both sides have."""
        figure = self.key_of(figure) or figure
        va = self.a.mean(figure) if self.a else None
        vb = self.b.mean(figure) if self.b else None
        if va is None or vb is None or va == 0:
            return None
        return vb / va - 1

    @property
    def contended(self) -> list[str]:
        """``A round 1: others used 63% ...`` for each contended round of either side: the row judges nothing."""
        return [f"{side} {line}" for side, summary in (("A", self.a), ("B", self.b)) if summary
                for line in summary.contended]

    def interval(self, figure: str) -> Optional[tuple[float, float]]:
        """The 95 % interval of B/A - 1 (results/figures/noise.py); None where a side has no figure or no noise."""
        key, a, b = self.key_of(figure) or figure, self.a, self.b
        return noise.change_interval(a.mean(key), b.mean(key), a.log_se(key), b.log_se(key)) if a and b else None

    def verdict(self, figure: str) -> Optional[str]:
        """within noise, regression, improvement, or not judged (a contended side); None without an interval."""
        if self.change(figure) is None:
            return None
        if self.contended:
            return NOT_JUDGED
        key = self.key_of(figure) or figure
        better = FIGURE_BY_KEY[key].higher_is_better if key in FIGURE_BY_KEY else False  # memory: less is better
        return noise.verdict(self.interval(figure), better)

    def within_noise(self, figure: str) -> Optional[bool]:
        """True when the change's interval holds 0; None when it is unknown or not judged."""
        verdict = self.verdict(figure)
        return None if verdict in (None, NOT_JUDGED) else verdict == "within noise"

    @property
    def label(self) -> str:
        k = self.key
        parts = [str(k[f]) for f in ("case", "framework", "hardware") if k.get(f) is not None]
        if "nnodes" in k:
            parts.append(f"{k['nnodes']}x{k['nprocs_per_node']}")
        if k.get("extern_config") not in (None, "-"):
            parts.append(str(k["extern_config"]))
        sides = [s for s in (self.a, self.b) if s is not None and s.workload_hash is not None]
        if self.varying and sides:  # a fact the two sides differ in reads A/B, as the differing setting does
            words = []
            for key in self.varying:
                values = dict.fromkeys(fact_text(s.facts.get(key)) for s in sides)
                words.append(f"{FACT_LABEL.get(key, key)} {'/'.join(values)}")
            parts.append(f"({', '.join(words)})")
        if self.differs:
            parts.append(f"[differs: {', '.join(self.differs)}]")
        if self.departs:
            parts.append(f"[{self.departs}]")
        return " ".join(parts)

    @property
    def departs(self) -> str:
        """Which side departs from its case's policy (``B non-compliant``), or empty."""
        return compliance_marks.sides(self.a, self.b)


def compared(rows: Sequence[Row]) -> tuple[str, ...]:
    """COMPARED, then each HEADLINE figure that a side of some row has (an MLPerf import's time to train)."""
    sides = [s for row in rows for s in (row.a, row.b) if s is not None]
    samples = ("samples_per_s",) if any(s.mean("samples_per_s") is not None and s.mean("tokens_per_s_per_device")
                                        is None for s in sides) else ()  # a side with no tokens/s: BERT, DLRM
    return COMPARED[:1] + samples + COMPARED[1:] + tuple(f for f in HEADLINE if any(s.mean(f) is not None
                                                                                   for s in sides))


def match_fields(a: Selection, b: Selection, by_workload: bool = True) -> tuple[str, ...]:
    """The keys two rows must share to pair: WORKLOAD_MATCH (MATCH_FIELDS for rows without a workload), less
    what the two sides' filters set differently."""
    differ = {key for key in set(a.filters) | set(b.filters) if a.filters.get(key) != b.filters.get(key)}
    dropped = set(differ)
    for key in differ:
        dropped.update(DROPPED_BY.get(key, ()))
    if not by_workload and dropped & {"framework", "hardware"}:
        dropped.add("extern_config")  # file names carry the framework's folder or the accelerator's name
    return tuple(f for f in (WORKLOAD_MATCH if by_workload else MATCH_FIELDS) if f not in dropped)


def _match_key(summary: CaseSummary, a: Selection, b: Selection) -> tuple:
    if summary.workload_hash is None:  # an import's --set overrides count as its settings
        return (("case",) + tuple(summary.key.get(f) for f in match_fields(a, b, by_workload=False))
                + settings_key(summary.facts))
    model = json.dumps((summary.what.spec or {}).get("model"), sort_keys=True)
    values = {**summary.key, **summary.facts, "model": model}
    return ("workload",) + tuple(values.get(f) for f in match_fields(a, b))


def compare(a: Selection, b: Selection, a_attempts: Sequence[Attempt], b_attempts: Sequence[Attempt]) -> list[Row]:
    left: dict[tuple, list[CaseSummary]] = {}
    right: dict[tuple, list[CaseSummary]] = {}
    for side, attempts in ((left, a_attempts), (right, b_attempts)):
        for summary in summarize(attempts):
            side.setdefault(_match_key(summary, a, b), []).append(summary)
    everything = [s for side in (left, right) for group in side.values() for s in group]
    varying = tuple(differing([s.facts for s in everything if s.workload_hash is not None]))
    pairs = [pair for key in list(left) + [k for k in right if k not in left]
             for pair in zip_longest(left.get(key, []), right.get(key, []))]
    pairs = pair_by_one_setting(pairs)
    rows = []
    for sa, sb in pairs:
        shown, differs = (sa or sb).key, ()
        if sa is not None and sb is not None:  # name what differs on purpose by its two values
            shown = {f: v if v == sb.key.get(f) else f"{v}/{sb.key.get(f)}" for f, v in sa.key.items()}
            differs = tuple(d for d in setting_differences(sa, sb) if d.split(" ", 1)[0] not in CASE_SETTINGS)
        rows.append(Row(shown, sa, sb, varying, differs))
    return rows


def _percent(x: float) -> str:
    return f"{x:+.0%}" if abs(x) >= 0.005 else f"{x:+.1%}"


def format_change(row: Row, figure: str, lines: bool = False) -> str:
    """``-66% [-70%, -61%] (regression)``: the change, its interval and the verdict (NOISE_RULE); ``lines``: the
    interval on a line of its own, so a terminal's column stays narrow."""
    change = row.change(figure)
    if change is None:
        return "n/a"
    interval, verdict = row.interval(figure), row.verdict(figure)
    bounds = f"[{_percent(interval[0])}, {_percent(interval[1])}]" if interval else ""
    said = " ".join(f"({w})" for w in (verdict, row.departs) if w)  # a departing side: always said
    if lines:
        return "\n".join(filter(None, [" ".join(filter(None, [_percent(change), said])), bounds]))
    return " ".join(filter(None, [_percent(change), bounds, said]))


def format_rounds(summary: Optional[CaseSummary]) -> str:
    """``3 ok`` or ``2 ok, 1 failed``: how many rounds the side's figures are the mean of."""
    if summary is None:
        return "-"
    return ", ".join(f"{n} {status}" for status, n in summary.statuses.items())


def format_value(summary: Optional[CaseSummary], figure: str, row: Optional[Row] = None) -> str:
    """The mean over ok rounds, with its coefficient of variation when there are several rounds. ``memory``
    (with its ``row``) is the definition both sides have."""
    if summary is None:
        return "(no run)"
    if figure == "memory":
        figure = row.key_of(figure) if row else (summary.memory_keys or [None])[0]
        if figure is None:
            return "n/a"
    value = summary.mean(figure)
    if value is None and not summary.ok:  # say why there is no figure
        return "n/a (" + ", ".join(f"{n} {s}" for s, n in summary.statuses.items()) + ")"
    if value is None:
        return "n/a"
    return summary.cell(figure)

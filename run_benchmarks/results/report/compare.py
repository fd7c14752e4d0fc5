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
``nothing_in_common`` says so once, with the closest pairs and what differs in each.

The figures are COMPARED's, then MLPerf's time to train and last eval accuracy where a side has them.

A side that departs from its case's policy is named in the row's label and beside every change
(``+12% (B non-compliant)``; report/compliance_marks.py): a comparison is never shown without saying so.

Noise: a change is marked "within noise" when both sides have at least two ok rounds and
|B / A - 1| < CV_A + CV_B, the sum of the two sides' coefficients of variation over rounds (NOISE_RULE).
With one round on a side its spread is unknown and nothing is marked.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import zip_longest
from typing import Optional, Sequence

from run_benchmarks.results import memory
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.report.facts import FACT_LABEL, MATCH_FACTS, differing, fact_text, settings_key
from run_benchmarks.results.report.summary import CaseSummary, summarize

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
CASE_SETTINGS = ("case", "framework", "framework_version", "hardware", "nnodes", "nprocs_per_node")
# "memory" is the memory definition both sides have (results/memory.py: device in use, reserved, the worker's
# peak), named in the row: two definitions are never compared with each other
COMPARED = ("tokens_per_s_per_device", "tflops_per_device", "mfu", "memory")
# MLPerf's score and its quality metric (an imported result log's): compared where a side has them (compared()).
HEADLINE = ("time_to_train_s", "eval_accuracy")
SHORT = {"tokens_per_s_per_device": "tok/s/dev", "tflops_per_device": "TFLOP/s/dev", "mfu": "MFU",
         "memory": "memory", "time_to_train_s": "time to train", "eval_accuracy": "eval accuracy (last)",
         "samples_per_s": "samples/s"}
NOISE_RULE = "within noise: |B/A - 1| < CV(A) + CV(B), the spreads over rounds (both sides need 2+ ok rounds)"


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

    def noise(self, figure: str) -> Optional[float]:
        """CV(A) + CV(B) over ok rounds; None when a side has fewer than two rounds of the figure."""
        figure = self.key_of(figure) or figure
        spreads = [s.figures.get(figure) if s else None for s in (self.a, self.b)]
        if any(st is None or st.n < 2 or st.cv != st.cv for st in spreads):
            return None
        return spreads[0].cv + spreads[1].cv

    def within_noise(self, figure: str) -> Optional[bool]:
        """True when the change is smaller than the combined noise (NOISE_RULE); None when unknown."""
        change, noise = self.change(figure), self.noise(figure)
        if change is None or noise is None:
            return None
        return abs(change) < noise

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
    pairs = _pair_by_one_setting(pairs)
    rows = []
    for sa, sb in pairs:
        shown, differs = (sa or sb).key, ()
        if sa is not None and sb is not None:  # name what differs on purpose by its two values
            shown = {f: v if v == sb.key.get(f) else f"{v}/{sb.key.get(f)}" for f, v in sa.key.items()}
            differs = tuple(d for d in setting_differences(sa, sb) if d.split(" ", 1)[0] not in CASE_SETTINGS)
        rows.append(Row(shown, sa, sb, varying, differs))
    return rows


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def setting_differences(sa: CaseSummary, sb: CaseSummary) -> list[str]:
    """``name A/B`` for each case column and workload setting (flattened, ``train.micro_batch_size``) that
    differs; a setting one side leaves at its default reads ``default``."""
    out = [f"{f} {sa.key.get(f)}/{sb.key.get(f)}" for f in CASE_SETTINGS if sa.key.get(f) != sb.key.get(f)]
    if sa.what.spec is None or sb.what.spec is None:
        if sa.key.get("extern_config") != sb.key.get("extern_config"):
            out.append(f"extern_config {sa.key.get('extern_config')}/{sb.key.get('extern_config')}")
        fa, fb = sa.facts, sb.facts  # an import's --set overrides
        return out + [f"{k} {fa.get(k, 'default')}/{fb.get(k, 'default')}" for k in sorted({*fa, *fb})
                      if "." in k and fa.get(k) != fb.get(k)]
    fa, fb = _flat(sa.what.spec), _flat(sb.what.spec)
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key) != fb.get(key):
            out.append(f"{key} {fa.get(key, 'default')}/{fb.get(key, 'default')}")
    return out


def _pair_by_one_setting(pairs: list[tuple]) -> list[tuple]:
    """Rows left with one side only pair with the other side's nearest row when the two differ in exactly
    one setting (two runs of one case, micro batch 4 and 8)."""
    lonely = [sb for sa, sb in pairs if sa is None]
    taken: set[int] = set()
    out = []
    for sa, sb in pairs:
        if sa is not None and sb is None:
            near = [r for r in lonely if id(r) not in taken and len(setting_differences(sa, r)) == 1]
            if near:
                sb = near[0]
                taken.add(id(sb))
        out.append((sa, sb))
    return [(sa, sb) for sa, sb in out if not (sa is None and id(sb) in taken)]


def nothing_in_common(rows: Sequence[Row], closest: int = 3) -> Optional[list[str]]:
    """When no row has both sides: one line saying so, then the ``closest`` pairs (fewest differing
    settings) with what differs in each; None when something paired."""
    if not rows or any(r.a is not None and r.b is not None for r in rows):
        return None
    lefts, rights = [r.a for r in rows if r.a], [r.b for r in rows if r.b]
    near = sorted(((setting_differences(a, b), i, j) for i, a in enumerate(lefts) for j, b in enumerate(rights)),
                  key=lambda t: (len(t[0]), t[1], t[2]))[:closest]
    lines = [f"nothing in common: none of A's {len(lefts)} workload(s) ran on B's side ({len(rights)} workload(s)) "
             "with the same settings" + ("; the closest pairs:" if near else "")]
    for diffs, i, j in near:
        lines.append(f"  {lefts[i].label} {lefts[i].config} vs {rights[j].label} {rights[j].config}: "
                     f"{len(diffs)} setting(s) differ: {', '.join(diffs[:6])}" + (" ..." if len(diffs) > 6 else ""))
    return lines


def format_change(row: Row, figure: str) -> str:
    change = row.change(figure)
    if change is None:
        return "n/a"
    text = f"{change:+.0%}" if abs(change) >= 0.005 else f"{change:+.1%}"
    text = text + " (within noise)" if row.within_noise(figure) else text
    return f"{text} ({row.departs})" if row.departs else text  # never a ranking without saying a side departs


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

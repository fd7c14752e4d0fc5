"""The PaddleNLP-vs-PyTorch finetune table from stored runs: one row per model x method x hardware x devices x
global batch, each framework's setup and effective tokens/s per device (padding excluded), and the speedup
Paddle / Torch; a workload that ran out of memory on every round reads ``OOM``. The device column is named by
the rows' kind (``CPU processes`` on a CPU), not the reference table's "GPUs".

Nothing is measured again here. The rounds are grouped per workload by ``summary.summarize`` (repeats and
rounds of one workload hash are one summary: its mean and spread), the figure is the stored
``effective_tokens_per_s_per_device`` (results/analyze.py), the setup words come from the layout facts
(report/facts.py) and the speedup and its noise mark from ``compare.Row`` (B = Paddle over A = Torch).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import Optional, Sequence

from run_benchmarks.results.report import compare, compliance_marks
from run_benchmarks.results.report.chart_data import devices
from run_benchmarks.results.report.summary import CaseSummary
from run_benchmarks.results.report.views import View

FIGURE = "effective_tokens_per_s_per_device"
METHODS = {"lora": "LoRA", "finetune": "full finetune"}  # workload task -> the table's method, in table order
SUFFIXES = {"_lora": "lora", "_sft": "finetune"}  # a row without a stored workload: its case name says the task
FRAMEWORKS = ("paddle", "torch")
HEADERS = ["model", "method", "devices", "batch", "Paddle setup", "Paddle effective tok/s/dev", "Torch setup",
           "Torch effective tok/s/dev", "speedup (Paddle/Torch)"]  # "devices": the rows' kind names it (device_noun)
# What a row's device count counts: the worker's memory reading says where it ran (RSS: processes on a CPU;
# an allocator's peak: a device, whose kind the store does not hold, so it stays "device").
NOUNS = {"rss": ("CPU process", "CPU processes")}


@dataclass(frozen=True)
class TableRow:
    model: str
    method: str  # a METHODS key
    hardware: str
    devices: int
    batch: Optional[int]  # global batch in samples (the layout facts), None where no workload was stored
    paddle: Optional[CaseSummary]
    torch: Optional[CaseSummary]

    @property
    def pair(self) -> compare.Row:
        return compare.Row({}, self.torch, self.paddle)

    def speedup(self) -> Optional[float]:
        """Paddle's mean effective tokens/s per device over Torch's (compare's B / A - 1, plus one)."""
        change = self.pair.change(FIGURE)
        return None if change is None else change + 1


def method_of(summary: CaseSummary) -> Optional[str]:
    task = summary.facts.get("task")
    if task is None:
        task = next((t for suffix, t in SUFFIXES.items() if str(summary.key["case"]).endswith(suffix)), None)
    return task if task in METHODS else None


def model_of(case: str) -> str:
    """``llama_7b`` from ``llama_7b_lora`` or ``llama_7b_sft``: the model both methods finetune."""
    for suffix in SUFFIXES:
        if case.endswith(suffix):
            return case[: -len(suffix)]
    return case


def rows(summaries: Sequence[CaseSummary]) -> tuple[list[TableRow], list[str]]:
    """The table's rows, and a line for each kind of summary left out (another task or framework)."""
    groups: dict[tuple, dict[str, list[CaseSummary]]] = {}
    left_out: dict[str, int] = {}
    for s in summaries:
        method, framework = method_of(s), s.key["framework"]
        if method is None or framework not in FRAMEWORKS:
            why = f"framework {framework}" if method else f"task {s.facts.get('task') or s.key['case']}"
            left_out[why] = left_out.get(why, 0) + 1
            continue
        batch = s.facts.get("global_batch_samples")
        key = (model_of(str(s.key["case"])), method, str(s.key["hardware"]), devices(s), batch)
        groups.setdefault(key, {}).setdefault(framework, []).append(s)
    out = []
    models = list(dict.fromkeys(k[0] for k in groups))  # models in the order the runs ran them
    for key in sorted(groups, key=lambda k: (models.index(k[0]), list(METHODS).index(k[1]), k[2], k[3], k[4] or 0)):
        sides = groups[key]
        # one workload per framework is the table's shape; more (two setups at one batch) get a line each
        for paddle, torch in zip_longest(sides.get("paddle", []), sides.get("torch", [])):
            out.append(TableRow(*key, paddle=paddle, torch=torch))
    notes = [f"left out: {n} workload(s) of {why} (the table holds Paddle and Torch LoRA and full finetunes)"
             for why, n in left_out.items()]
    return out, notes


def setup(summary: Optional[CaseSummary]) -> str:
    """The layout in each framework's words: ``MP4 + recompute`` (Paddle), ``ZeRO-2 x4`` (Torch), with the
    micro batch and precision; the extern config's name where the round stored no workload."""
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
    if f.get("recompute") not in (None, "none"):
        parts.append("recompute")
    layout = " + ".join(parts) or "1 device"
    amp = f" {f['train.amp_level']}" if paddle and f.get("train.amp_level") else ""
    return f"{layout}, micro batch {f.get('micro_batch_size')}, {f.get('precision')}{amp}"


def cell(summary: Optional[CaseSummary]) -> str:
    """Mean over the ok rounds with its spread (± CV, and how many rounds) · ``OOM`` when every round ran out
    of memory · why there is no figure otherwise."""
    if summary is None:
        return "-"
    stats = summary.figures.get(FIGURE)
    if stats is None:
        if summary.statuses.get("oom") and not summary.ok:
            return "OOM"
        return compare.format_value(summary, FIGURE)
    text = summary.cell(FIGURE) + (f" n={stats.n}" if stats.n > 1 else "")
    if len(summary.ok) < len(summary.attempts):
        text += f" ({compare.format_rounds(summary)})"
    return text + (f" ({compliance_marks.NON_COMPLIANT})" if summary.non_compliant else "")


def speedup_text(row: TableRow) -> str:
    value = row.speedup()
    if value is None:
        return "-"
    departs = compliance_marks.sides(row.torch, row.paddle, ("Torch", "Paddle"))
    return (f"{value:.2f}x" + (" (within noise)" if row.pair.within_noise(FIGURE) else "")
            + (f" ({departs})" if departs else ""))


def device_noun(table: Sequence[TableRow]) -> tuple[str, str]:
    """(singular, plural) for the rows' devices: ``CPU process`` where every row ran on a CPU, else ``device``
    (never "GPU" for what is not one)."""
    kinds = {s.peak_kind for r in table for s in (r.paddle, r.torch) if s is not None and s.peak_kind}
    return NOUNS.get(kinds.pop(), ("device", "devices")) if len(kinds) == 1 else ("device", "devices")


def devices_text(row: TableRow, noun: tuple[str, str]) -> str:
    return f"{row.devices} {noun[0] if row.devices == 1 else noun[1]}"


def view(table: Sequence[TableRow], title: str, notes: Sequence[str] = ()) -> View:
    several = len({r.hardware for r in table}) > 1
    headers = HEADERS[:2] + (["hardware"] if several else []) + [device_noun(table)[1], *HEADERS[3:]]
    body = [[r.model, METHODS[r.method], *([r.hardware] if several else []), str(r.devices),
             "-" if r.batch is None else str(r.batch), setup(r.paddle), cell(r.paddle), setup(r.torch),
             cell(r.torch), speedup_text(r)] for r in table]
    hardware = "" if several or not table else f" on {table[0].hardware}"
    return View(title + hardware, headers, body, [
        "effective tok/s/dev: tokens that are not padding, per device per second, warm-up excluded; the mean "
        "over the ok rounds of one workload (all repeats), ± its coefficient of variation over n rounds",
        "speedup = Paddle's mean / Torch's; " + compare.NOISE_RULE,
        "OOM: every round of that workload ran out of memory; batch: global batch in samples per step",
        *notes, *_departures(table)])


def _departures(table: Sequence[TableRow]) -> list[str]:
    """Each workload of the table that departs from its case's policy, with what it departs in."""
    sides = {id(s): s for r in table for s in (r.paddle, r.torch) if s is not None}
    return [f"{s.label} {s.config}: {flag}" for s in sides.values() for flag in compliance_marks.flags(s.attempts)]

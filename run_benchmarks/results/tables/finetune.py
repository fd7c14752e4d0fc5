"""``accelbench table finetune``: PaddleNLP's finetune table against PyTorch. One row per model x method (LoRA,
full finetune) x GPUs x global batch; per framework the published effective tokens/s, ours (stored
``effective_tokens_per_s_per_device``, padding excluded, mean ± CV over the ok rounds of one workload) and the
ratio; each side's setup in its framework's words; the speedup Paddle / Torch, ours (with compare's noise rule)
and the source's. A workload whose every round ran out of memory reads ``OOM``.

A run is placed by its model (the source's name for our case: ``llama_7b`` is Llama-7b), method, GPU count and
global batch; a model the source has not (the CPU twin's ``llama_tiny``) gets rows of its own after the
source's, in the order the runs ran."""
from __future__ import annotations

from typing import Optional, Union

from run_benchmarks.results.report import compare, compliance_marks
from run_benchmarks.results.report.chart_data import devices
from run_benchmarks.results.report.summary import CaseSummary
from run_benchmarks.results.tables.core import Built, Measure, Placement, ReferenceTable, Row
from run_benchmarks.results.tables.words import setup

FIGURE = "effective_tokens_per_s_per_device"
METHODS = {"lora": "LoRA", "finetune": "full finetune"}  # workload task -> the table's method
SUFFIXES = {"_lora": "lora", "_sft": "finetune"}  # a row without a stored workload: its case name says the task
FRAMEWORKS = ("paddle", "torch")
SOURCE_MODELS = {"llama_7b": "Llama-7b", "llama_13b": "Llama-13b", "bloom_7b1": "Bloomz-7b1-mt"}


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


class FinetuneTable(ReferenceTable):
    name = "finetune"
    title = "finetune table"
    label_headers = ("model", "method", "devices", "batch")  # the source's "Num GPUs"; ours ran on "ran on"
    measures = (Measure("paddle", "Paddle effective tok/s/dev", FIGURE),
                Measure("torch", "Torch effective tok/s/dev", FIGURE))
    extra_headers = ("Paddle setup", "Torch setup", "speedup (Paddle/Torch)", "published speedup")
    sweeps = ("configs/sweeps/finetune_table_a100.yaml",)
    twin = "configs/sweeps/finetune_table_tiny.yaml"

    def place(self, summary: CaseSummary) -> Union[Placement, str]:
        method, framework = method_of(summary), summary.key["framework"]
        if method is None:
            return f"task {summary.facts.get('task') or summary.key['case']}"
        if framework not in FRAMEWORKS:
            return f"framework {framework}"
        model = model_of(str(summary.key["case"]))
        batch = summary.facts.get("global_batch_samples")
        key = (SOURCE_MODELS.get(model, model), METHODS[method], str(devices(summary)),
               "-" if batch is None else str(batch))
        return Placement(key, framework, key)

    def settings(self, row: Row) -> str:
        return "; ".join(f"{s.label}" + (f" {s.config}" if s.config not in ("", "-") else "")
                         for s in (row.ours.get(f) for f in FRAMEWORKS) if s is not None)

    def extra(self, row: Row) -> list[str]:
        return [setup(row.ours.get("paddle")), setup(row.ours.get("torch")), speedup_text(row),
                self._published_speedup(row)]

    def _published_speedup(self, row: Row) -> str:
        values = []
        for framework in FRAMEWORKS:
            figures = row.cell.published.get(framework, ())
            values.append(figures[0].values.get(FIGURE) if figures else None)
        if None in values or not values[1]:
            return "-"
        return f"{values[0] / values[1]:.2f}x"

    def notes(self, built: Built) -> list[str]:
        return ["effective tok/s/dev: tokens that are not padding, per device per second, warm-up excluded; the "
                "mean over the ok rounds of one workload (all repeats), ± its coefficient of variation over n "
                "rounds",
                "speedup = Paddle's mean / Torch's; " + compare.NOISE_RULE + "; published speedup: the source's "
                "main-table pair (its first figure of each side)",
                "OOM: every round of that workload ran out of memory; batch: global batch in samples per step"]


def speedup(row: Row) -> Optional[float]:
    """Paddle's mean effective tokens/s per device over Torch's (compare's B / A - 1, plus one)."""
    change = compare.Row({}, row.ours.get("torch"), row.ours.get("paddle")).change(FIGURE)
    return None if change is None else change + 1


def speedup_text(row: Row) -> str:
    value = speedup(row)
    if value is None:
        return "-"
    noise = compare.Row({}, row.ours.get("torch"), row.ours.get("paddle")).within_noise(FIGURE)
    departs = compliance_marks.sides(row.ours.get("torch"), row.ours.get("paddle"), ("Torch", "Paddle"))
    return f"{value:.2f}x" + (" (within noise)" if noise else "") + (f" ({departs})" if departs else "")


TABLE = FinetuneTable()

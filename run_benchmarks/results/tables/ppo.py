"""``accelbench table ppo``: ColossalAI chat's PPO benchmark grid (devices x strategy x model x batch), which
publishes no figures: the grid with ours in it. One row per model (GPT-2 s ... 10b; OPT 125m ... 13b with LoRA)
x strategy; one column per GPU count (1, 2, 4, 8); each cell the batches we ran, with experience making and
learning samples/s per GPU (the PPO worker's phase figures, report/ppo_phases.py).

A run is placed by its case (``ppo_gpt2_<size>``, ``ppo_opt_<size>``), its strategy read from the stored
layout (no sharding: ddp; sharding stage 1/2: zero1/zero2; stage 3: gemini, which our ZeRO-3 stands for;
``offload``: the strategy's _cpu variant) and its GPU count. Other ppo cases (the CPU twin's ``ppo_tiny``) get
rows of their own."""
from __future__ import annotations

from typing import Optional, Union

from run_benchmarks.results.figures.analyze import Stats
from run_benchmarks.results.report import chart_data
from run_benchmarks.results.report.ppo_phases import phase_figures
from run_benchmarks.results.report.summary import CaseSummary
from run_benchmarks.results.tables.core import Cell, Measure, Placement, ReferenceTable
from run_benchmarks.results.tables.published import PublishedTable

STRATEGIES = {"ddp": "ddp", "colossalai_zero1": "zero1", "colossalai_zero1_cpu": "zero1 + offload",
              "colossalai_zero2": "zero2", "colossalai_zero2_cpu": "zero2 + offload",
              "colossalai_gemini": "gemini (our ZeRO-3)", "colossalai_gemini_cpu": "gemini + offload (our ZeRO-3)"}
OURS = {("none", False): "ddp", ("stage1", False): "zero1", ("stage1", True): "zero1 + offload",
        ("stage2", False): "zero2", ("stage2", True): "zero2 + offload", ("stage3", False): "gemini (our ZeRO-3)",
        ("stage3", True): "gemini + offload (our ZeRO-3)"}
EXPERIENCE, LEARNING = "experience.samples_per_s_per_device", "learning.samples_per_s_per_device"
FAMILIES = {"gpt2": ("GPT2", "ppo_gpt2_"), "opt_lora": ("OPT", "ppo_opt_")}


def model_label(family: str, size: str) -> str:
    return f"{FAMILIES[family][0]}-{size.upper()}" + (" LoRA" if family == "opt_lora" else "")


class PpoTable(ReferenceTable):
    name = "ppo"
    title = "ppo table"
    label_headers = ("model", "strategy")
    measures = tuple(Measure(str(n), f"{n} GPU{'s' if n > 1 else ''}", EXPERIENCE) for n in (1, 2, 4, 8))
    has_published = False
    sweeps = ("configs/sweeps/ppo_table_h100.yaml", "configs/sweeps/ppo_table_h100x8.yaml")
    twin = "configs/sweeps/ppo_table_tiny.yaml"

    def cells(self, published: PublishedTable) -> list[Cell]:
        out = []
        for family in FAMILIES:
            for size in published.axes[family]:
                for strategy in published.axes["strategy"]:
                    key = (model_label(family, str(size)), STRATEGIES[str(strategy)])
                    out.append(Cell(f"{family}-{size}-{strategy}", key, key, {}, "colossalai-chat"))
        return out

    def place(self, summary: CaseSummary) -> Union[Placement, str]:
        f, case = summary.facts, str(summary.key["case"])
        if f.get("task") != "ppo":
            return f"task {f.get('task') or case}"
        devices = chart_data.devices(summary)
        if str(devices) not in {m.name for m in self.measures}:
            return f"{devices} devices (the grid: 1, 2, 4, 8)"
        strategy = OURS.get((str(f.get("sharding") or "none"), bool(f.get("offload"))))
        if strategy is None:
            return "a layout the grid has not (tensor or pipeline parallel)"
        model = case
        for family, (_, prefix) in FAMILIES.items():
            if case.startswith(prefix):
                model = model_label(family, case.removeprefix(prefix))
        return Placement((model, strategy), str(devices), (model, strategy))

    def intended(self, cell: Cell) -> str:
        """What the shipped sweeps run for a cell: its case at each GPU count with the strategy's settings."""
        model, strategy = cell.key
        family, size = cell.id.split("-")[0], cell.id.split("-")[1]
        sets = {v: k for k, v in OURS.items()}.get(strategy)
        words = "" if sets is None or sets[0] == "none" else f" --set parallel.sharding={sets[0]}"
        words += " --set parallel.offload=true" if sets and sets[1] else ""
        words += " --set train.lora_rank=R" if family == "opt_lora" else ""
        return (f"{FAMILIES[family][1]}{size}:torch:H100:1:N (N: the column's GPUs){words} --set "
                "ppo.experience_batch_size=B --set train.micro_batch_size=B (B: 1, 2, 4, 8)")

    def ours_value(self, measure: Measure, summary: CaseSummary) -> Optional[Stats]:
        return _phase(summary).get(measure.figure)

    def figure_text(self, measure: Measure, summary: CaseSummary) -> str:
        f = summary.facts
        batch = f.get("ppo.experience_batch_size") or 8  # the schema's default where the workload omits it
        phases = _phase(summary)
        if EXPERIENCE not in phases:
            return f"b{batch}: " + super().figure_text(measure, summary)
        learning = phases.get(LEARNING)
        return f"b{batch}: {phases[EXPERIENCE].mean:.3g} / " + ("-" if learning is None else f"{learning.mean:.3g}")


def _phase(summary: CaseSummary) -> dict[str, Stats]:
    return {item["key"]: Stats(**item["stats"]) for item in phase_figures(summary)[0]}


TABLE = PpoTable()

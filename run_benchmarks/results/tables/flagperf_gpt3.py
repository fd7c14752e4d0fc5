"""``accelbench table flagperf_gpt3``: FlagPerf's GPT-3 Paddle guide, GPT-3 6.7B and 13B on one A100 80G
machine of 8 GPUs, one row per extern config: tokens/s per device and memory (actual / total) per device, the
published figure, ours and the ratio.

A run is placed by its case (``gpt3_6.7B``, ``gpt3_13B``) and the extern config it ran with (the file name is
the guide's config name); Paddle only, as the guide. Other configs and cases (the CPU twin's ``gpt3_tiny`` with
the cpu vendor's configs) get rows of their own after the guide's. Memory is the row's headline definition
(results/figures/memory.py: what every view shows for it), in GiB, the guide's unit."""
from __future__ import annotations

from typing import Optional, Union

from run_benchmarks.results.figures.analyze import Stats
from run_benchmarks.results.report.summary import CaseSummary
from run_benchmarks.results.tables.core import Measure, Placement, ReferenceTable

MODELS = {"gpt3_6.7B": "GPT3-6.7B", "gpt3_13B": "GPT3-13B"}
GIB = 2 ** 30


class FlagperfGpt3Table(ReferenceTable):
    name = "flagperf_gpt3"
    title = "flagperf_gpt3 table"
    label_headers = ("model", "config")
    measures = (Measure("throughput", "tokens/s/device", "tokens_per_s_per_device"),
                Measure("memory", "memory/device (GiB)", "memory_gib_per_device", chart=False))
    sweeps = ("configs/sweeps/flagperf_gpt3_table_a100.yaml",)
    twin = "configs/sweeps/flagperf_gpt3_table_tiny.yaml"

    def place(self, summary: CaseSummary) -> Union[Placement, str]:
        case, framework = str(summary.key["case"]), summary.key["framework"]
        if not case.startswith("gpt3_"):
            return f"case {case}"
        if framework != "paddle":
            return f"framework {framework} (the guide is Paddle's)"
        key = (MODELS.get(case, case), summary.config)
        return Placement(key, "", key)

    def ours_value(self, measure: Measure, summary: CaseSummary) -> Optional[Stats]:
        if measure.name != "memory":
            return super().ours_value(measure, summary)
        chosen = summary.memory_figure
        return None if chosen is None else Stats.of([chosen.value / GIB])

    def figure_text(self, measure: Measure, summary: CaseSummary) -> str:
        if measure.name != "memory" or summary.memory_figure is None:
            return super().figure_text(measure, summary)
        return summary.memory()

    def notes(self, built) -> list[str]:
        return ["memory ours: the row's headline memory figure (results/figures/memory.py), the largest device of the "
                "largest round, in GiB, against the vendor's declared total"]


TABLE = FlagperfGpt3Table()

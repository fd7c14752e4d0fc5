"""Published benchmark tables beside our runs (``accelbench table NAME``): each source's table in its shape,
the published figure of every cell (published/<table>.yaml, with its source and conditions), ours from the
store, and their ratio. ``core.py`` is the one mechanism; a table is a plug-in in the registry below, imported
when first asked for: mfu (the "Benchmark LLM Training" repository's MFU tables), flagperf_gpt3 (FlagPerf's
GPT-3 Paddle guide), finetune (PaddleNLP against Torch), ppo (ColossalAI chat's benchmark grid).

Beside report/ in results/' layers, and importing it (its summaries, charts, marks and views); report's table
formats render these tables in turn."""
from __future__ import annotations

from typing import TYPE_CHECKING

from run_benchmarks.registry import Registry

if TYPE_CHECKING:
    from run_benchmarks.results.tables.core import ReferenceTable

TABLES: "Registry[ReferenceTable]" = Registry("table")
NAMES = ("mfu", "flagperf_gpt3", "finetune", "ppo")
TABLES.register("mfu", "run_benchmarks.results.tables.mfu:TABLE")  # by path, spelled out: the house's
TABLES.register("flagperf_gpt3", "run_benchmarks.results.tables.flagperf_gpt3:TABLE")  # import checks read them
TABLES.register("finetune", "run_benchmarks.results.tables.finetune:TABLE")
TABLES.register("ppo", "run_benchmarks.results.tables.ppo:TABLE")

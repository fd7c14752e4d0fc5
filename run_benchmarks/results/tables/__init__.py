"""Published benchmark tables beside our runs (``accelbench table NAME``): each source's table in its shape,
the published figure of every cell (published/<table>.yaml, with its source and conditions), ours from the
store, and their ratio. ``core.py`` is the one mechanism; a table is a plug-in in the registry below, imported
when first asked for: mfu (the "Benchmark LLM Training" repository's MFU tables), flagperf_gpt3 (FlagPerf's
GPT-3 Paddle guide), finetune (PaddleNLP against Torch), ppo (ColossalAI chat's benchmark grid)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from run_benchmarks.registry import Registry

if TYPE_CHECKING:
    from run_benchmarks.results.tables.core import ReferenceTable

TABLES: "Registry[ReferenceTable]" = Registry("table")
NAMES = ("mfu", "flagperf_gpt3", "finetune", "ppo")
for _name in NAMES:
    TABLES.register(_name, f"run_benchmarks.results.tables.{_name}:TABLE")

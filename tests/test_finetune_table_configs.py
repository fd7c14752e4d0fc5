"""The PaddleNLP-vs-PyTorch finetune table's nvidia configs: one per framework for every row, each plans
(``--dry-run``) on the layout and batch its name states."""
from __future__ import annotations

import re

import pytest
import yaml

from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs

from .conftest import ROOT

NAME = re.compile(r"config_TP(\d)PP1SH(\d)SP(\d)BS(\d+)(RC)?A10080Gx1x(\d)")
# The reference table's rows: (case, GPUs, global batch); LoRA on one GPU, full finetune on four.
ROWS = {("bloom_7b1_lora", 1, 4), ("llama_7b_lora", 1, 4), ("llama_13b_lora", 1, 8),
        ("bloom_7b1_sft", 4, 8), ("bloom_7b1_sft", 4, 16), ("llama_7b_sft", 4, 8), ("llama_7b_sft", 4, 16),
        ("llama_13b_sft", 4, 8), ("llama_13b_sft", 4, 16)}
CONFIGS = sorted((p.parent.parent.name, p.parent.name, p.stem)
                 for suffix in ("lora", "sft") for p in (ROOT / "vendors/nvidia").glob(f"*_{suffix}/*/config_*.yaml"))


def test_every_row_has_one_config_per_framework():
    rows: dict = {}
    for case, framework, name in CONFIGS:
        tp, stage, degree, batch, recompute, gpus = NAME.fullmatch(name).groups()
        rows.setdefault((case, int(gpus), int(batch)), []).append(framework)
    assert set(rows) == ROWS
    assert all(sorted(frameworks) == ["paddle", "torch"] for frameworks in rows.values())


@pytest.mark.parametrize("case, framework, name", CONFIGS, ids=["/".join(c) for c in CONFIGS])
def test_each_config_plans_on_the_layout_its_name_states(case, framework, name, tmp_path):
    tp, stage, degree, batch, recompute, gpus = NAME.fullmatch(name).groups()
    plan = build_run_plan(load_inputs(ROOT), [f"{case}:{framework}:A100:1:{gpus}"], "table", tmp_path, name)
    (planned,) = plan.cases
    spec = planned.workload
    train, par = spec.train, spec.parallel
    assert spec.task == ("lora" if case.endswith("_lora") else "finetune") and spec.data.instruction
    assert (par.tensor_parallel_degree, par.sharding) == (int(tp), f"stage{stage}" if stage != "0" else "none")
    if stage != "0":
        assert par.sharding_parallel_degree == int(degree)
    data_ranks = int(gpus) // int(tp)
    assert train.micro_batch_size * data_ranks * train.gradient_accumulation_steps == int(batch)
    assert train.recompute == ("full" if recompute else "none")
    assert train.precision == "fp16" and (framework == "torch" or train.amp_level == "O2")
    assert "Departs from the reference" in yaml.safe_load(planned.extern_config.read_text())["description"]


@pytest.mark.parametrize("case, framework, name", [c for c in CONFIGS if c[2].endswith("x1x1")][:2])
def test_the_cli_dry_run_plans_a_lora_row(accelbench, case, framework, name):
    done = accelbench("run", f"{case}:{framework}:A100:1:1", "--extern_config_file", name, "--dry-run",
                      "--root", str(ROOT))
    assert done.returncode == 0, done.stderr
    assert name in done.stdout

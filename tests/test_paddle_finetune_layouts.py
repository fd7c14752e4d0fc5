"""Paddle full finetune on instruction data in 2-rank layouts, loss for loss against one process (e2e: launches).

From one weights file (``train.init_weights``) and the same generated instruction
records, a full finetune of llama_tiny_sft with tensor parallel 2 (fleet's mp
layers) and with sharding over 2 (stage1: stage2/3 need an accelerator) gives
the losses of one torch process with the whole batch, within tests/test_parity.py's
tolerances (5e-6 absolute on losses, 1e-5 relative on gradient norms; sharding
reports no gradient norm). The batches
differ in width from step to step and across data ranks (each rank pads its own
micro-batch): the loss is normalised by the global count of supervised tokens,
all-reduced, as in the torch worker. One Paddle process against torch (this full
finetune from one weights file, and the LoRA parity) is checked in-process by
tests/test_paddle_finetune.py (it was a launch of its own here too, which showed
nothing more); this module launches, so tests/conftest.py marks it e2e.
"""
from __future__ import annotations

import pytest

from .parity_launch import Run, launch
from .test_paddle import fleet_layout
from .test_parity import COMMON, ONE_THREAD, assert_trajectories_match
from .test_plan import build

CASE = "llama_tiny_sft"
DATA = ("data.records=48", "train.gradient_accumulation_steps=2")
LAYOUTS = {"tensor_parallel": ("train.micro_batch_size=4", "parallel.tensor_parallel_degree=2"),
           "sharding_stage1": ("train.micro_batch_size=2", "parallel.sharding=stage1")}


@pytest.fixture(scope="module")
def finetune_launches(tmp_path_factory):
    from training.torch.weights import write_initial_weights

    from .conftest import ROOT

    root = tmp_path_factory.mktemp("paddle_finetune")
    (case,) = build(ROOT, root, f"{CASE}:torch:cpu:1:1").cases
    weights = write_initial_weights(case.workload.model, seed=case.workload.train.seed, path=root / "init.npz")
    shared = (f"train.init_weights={weights}", *DATA)
    whole = ("train.micro_batch_size=4", *shared)
    return {
        "torch": launch(root / "torch", [Run("reference", f"{CASE}:torch:cpu:1:1", whole)], COMMON, env=ONE_THREAD),
        "paddle 2": launch(root / "paddle-2", [Run(layout, f"{CASE}:paddle:cpu:1:2", (*LAYOUTS[layout], *shared))
                                               for layout in sorted(LAYOUTS)], COMMON, group_by=fleet_layout),
    }


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_two_rank_finetune_matches_one_process(finetune_launches, layout):
    got = finetune_launches["paddle 2"].trajectory(layout)
    assert_trajectories_match(got, finetune_launches["torch"].trajectory("reference"), f"paddle sft {layout}",
                              norms="sharding" not in layout)
    metrics = finetune_launches["paddle 2"].metrics(layout)
    assert metrics.effective_tokens_per_s_per_device is not None  # instruction data: padding excluded

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
tests/test_paddle_finetune.py.

No launch of this module's own: the two Paddle runs join tests/paddle_pairs.py's shared launches of the same
fleet layouts (tensor parallel 2 beside gpt3_tiny's tensor- and sequence-parallel runs, sharding stage1 beside
gpt3_tiny's), run after them in the same processes (a fleet topology holds runs of any case; each run builds its
own model and data), so in the suite they cost their steps alone; this module alone launches those two. The torch
reference trains in this process with one OpenMP thread (tests/loss_runs.py's ``in_process``: the same plan,
worker entry and perf records as its former 1x1 torchrun launch, without the launcher and the worker's start;
measured: the same losses and gradient norms to the bit). No run adds time-breakdown steps
(test_parity.LAUNCH_COMMON): they would follow the 4 steps compared, and Paddle's TP2 and sharding stage1
breakdowns are tested on real ranks by the breakdown modules.
"""
from __future__ import annotations

import pytest

from .loss_runs import in_process, one_thread
from .paddle_pairs import ParityInputs
from .parity_launch import Run
from .test_parity import LAUNCH_COMMON, assert_trajectories_match
from .test_plan import build

CASE = "llama_tiny_sft"
DATA = ("data.records=48", "train.gradient_accumulation_steps=2")
LAYOUTS = {"tensor_parallel": ("train.micro_batch_size=4", "parallel.tensor_parallel_degree=2"),
           "sharding_stage1": ("train.micro_batch_size=2", "parallel.sharding=stage1")}


def label(layout: str) -> str:
    """The run's name in the shared launches (test_paddle's gpt3_tiny runs are named after the layout alone)."""
    return f"{CASE}-{layout}"


def shared_settings(inputs: ParityInputs) -> tuple[str, ...]:
    """The case's model with its seed in one weights file (written once, beside paddle_pairs' inputs), and the
    instruction data every run of this module reads."""
    from training.torch.weights import write_initial_weights

    from .conftest import ROOT

    path = inputs.root / f"{CASE}.npz"
    if not path.exists():
        (case,) = build(ROOT, inputs.root / CASE, f"{CASE}:torch:cpu:1:1").cases
        write_initial_weights(case.workload.model, seed=case.workload.train.seed, path=path)
    return (f"train.init_weights={path}", *DATA)


def two_rank_runs(inputs: ParityInputs) -> list[Run]:
    """Both layouts, for tests/paddle_pairs.py's shared launches (one per fleet layout)."""
    return [Run(label(layout), f"{CASE}:paddle:cpu:1:2",
                (*LAUNCH_COMMON, *LAYOUTS[layout], *shared_settings(inputs)))
            for layout in sorted(LAYOUTS)]


@pytest.fixture(scope="module")
def reference(paddle_pairs, tmp_path_factory):
    """One torch process with the whole batch (4 x 2 accumulation steps), from the same weights and records."""
    whole = ("train.micro_batch_size=4", *shared_settings(paddle_pairs.inputs))
    with one_thread():
        return in_process(tmp_path_factory.mktemp("paddle_finetune"),
                          [Run("reference", f"{CASE}:torch:cpu:1:1", whole)], LAUNCH_COMMON)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_two_rank_finetune_matches_one_process(paddle_pairs, reference, layout):
    got = paddle_pairs.launch.trajectory(label(layout))
    assert_trajectories_match(got, reference.trajectory("reference"), f"paddle sft {layout}",
                              norms="sharding" not in layout)
    metrics = paddle_pairs.launch.metrics(label(layout))
    assert metrics.effective_tokens_per_s_per_device is not None  # instruction data: padding excluded

"""Is it the same model, on real training runs: loss_check's verdicts on runs of the real worker (issue 34).

A 1-process reference of gpt3_tiny's model is recorded here, from 3 data seeds (``loss_reference.record``,
what ``accelbench reference record`` calls), at a shape small enough for a test: 1 layer, d_model 64, the
case's vocabulary (1024), sequence (128) and batch (8: 1024 tokens per step), 16 steps at lr 1e-3 from one
weights file. Then runs of another data seed are checked against it (``loss_check.check_curve``): DDP 1x2 and
ZeRO-2 1x2 of the same global batch and a Paddle process pass; deliberate defects fail (lr x10, lr ~0,
``debug.grad_noise``, fp16 whose gradients underflow); another tokens per step or another model is refused.

One-process torch runs train in this process (``tests/loss_runs.py``: planned as ``accelbench run`` plans
them, the worker's own entry, the orchestrator's reading of perf records) with one OpenMP thread, about 0.3 s
each when the cores are free; the 2-rank torch runs share one torchrun launch, the Paddle run one Paddle launch
(``tests/parity_launch.py``), both started first and run while the in-process runs train.

Measured on 2026-11-25 (2-core VM, loaded by other work) at this shape: a fresh data seed is 0 of 8 steps
outside, mean relative error 0.5 %; lr x10 8 of 8 outside, 22 %; lr 1e-9 8 of 8 outside, 18 %, loss fell
-0.013 against 1.31; ``debug.grad_noise`` 0.1, 0.2, 0.3 pass (0.3: 0 outside, 0.7 %), 0.35 is the smallest
tried that fails (1 of 8 outside, just over the 10 % allowed), 0.5 fails with 3 of 8 (AdamW's per-element
normalisation absorbs most relative noise); fp16 without loss scaling passes (see FP16_UNDERFLOW); the loss
scaled down by 2^-8, 2^-12, 2^-16: 8 of 8 outside, the loss fell 0.78, 0.33, -0.01.
"""
from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import yaml

from run_benchmarks.results.checks import loss_check, loss_reference
from run_benchmarks.results.checks.loss_reference import Curve, RunCurve
from training.contract.spec import ModelSpec

from .conftest import ROOT
from .loss_runs import launched, one_thread, train_here
from .parity_launch import Run, launch

CASE = "gpt3_tiny"
ONE = f"{CASE}:torch:cpu:1:1"
# No time-breakdown steps: they would run after the 16 steps a curve holds, 3 more per run (each layout's
# breakdown is tested on its own, test_breakdown_*).
SHAPE = ("model.n_layer=1", "model.d_model=64", "train.steps=16", "train.warmup_steps=2", "train.lr=1e-3",
         "train.breakdown_steps=0")
REFERENCE_SEEDS = (1, 2, 3)
RUN_SEED = "data.seed=4"  # the runs checked: a seed the reference never saw
# fp16 without loss scaling cannot underflow here: the smallest gradients that carry the signal, the
# logits' (p - y) / tokens ~ 1 / (vocab * tokens) = 1e-6, are fp16 subnormals (down to 6e-8), rounded but
# kept, and AdamW takes no notice of the rounding (measured: the same verdict as fp32 to 4 digits). A model
# underflows where vocab * tokens per micro-batch is ~256x larger (GPT-2: 50257 x 8 x 1024 = 4e8). The
# test below gets there by scaling the loss down by this factor (a GradScaler stuck at 2^-8), which is
# what no loss scaling does to that model's gradients.
FP16_UNDERFLOW = 2.0 ** -8
GRAD_NOISE_PASSES, GRAD_NOISE_FAILS = 0.3, 0.5  # measured: 0.3 passes, 0.35 fails by one step; 0.5 with margin


def _model() -> ModelSpec:
    model = yaml.safe_load((ROOT / "cases" / CASE / "case.yaml").read_text())["model"]
    return ModelSpec(**{**model, "n_layer": 1, "d_model": 64})


class Runs:
    """The module's runs: the shared settings, the reference, the launches' futures."""

    def __init__(self, root, settings: tuple[str, ...], launches: dict[str, Future]):
        self.root, self.settings, self.launches = root, settings, launches
        self.reference: Curve = loss_reference.record(
            [self.train(f"seed{seed}", f"data.seed={seed}") for seed in REFERENCE_SEEDS])

    def train(self, label: str, *settings: str, case_name: str = ONE) -> RunCurve:
        return train_here(self.root / "here", label, case_name, (*self.settings, *settings))

    def check(self, run: RunCurve) -> loss_check.LossVerdict:
        return loss_check.check_curve(run, self.reference, "the 1-process reference")

    def launched(self, which: str, label: str) -> RunCurve:
        return launched(self.launches[which].result(), label)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The reference, then the module's runs; the in-process ones with one OpenMP thread (``one_thread``)."""
    from training.torch.weights import write_initial_weights

    root = tmp_path_factory.mktemp("loss_runs")
    weights = write_initial_weights(_model(), seed=1234, path=root / "init.npz")
    settings = (*SHAPE, f"train.init_weights={weights}")  # Paddle starts from the same weights
    common = (*settings, RUN_SEED)
    with one_thread(), ThreadPoolExecutor(2) as pool:
        launches = {
            "torch": pool.submit(launch, root / "torch", [
                Run("ddp", f"{CASE}:torch:cpu:1:2", ("train.micro_batch_size=4",)),
                Run("zero2", f"{CASE}:torch:cpu:1:2", ("train.micro_batch_size=4", "parallel.sharding=stage2"))],
                common),
            "paddle": pool.submit(launch, root / "paddle", [Run("paddle", f"{CASE}:paddle:cpu:1:1", ())], common)}
        yield Runs(root, settings, launches)
        for future in launches.values():
            future.result()  # a launch's failure fails the module, not only the tests that read it


def _failed(verdict: loss_check.LossVerdict, *criteria: str) -> None:
    """The verdict fails, and names each of ``criteria`` (words of its reason lines) as failed."""
    assert not verdict.passed and verdict.verdict.startswith("FAIL"), verdict.reasons()
    failed = [line for line in verdict.reasons() if line.startswith("FAIL: ")]
    for words in criteria:
        assert any(words in line for line in failed), (words, verdict.reasons())


def _passed(verdict: loss_check.LossVerdict) -> None:
    assert verdict.passed and verdict.verdict == "pass", verdict.reasons()
    assert verdict.mean_rel_error < verdict.band.mean_rel_error and len(verdict.steps) == 8


def test_the_reference_is_three_seeds_of_one_process_that_learn(runs):
    ref = runs.reference
    assert ref.recorded.data_seeds == list(REFERENCE_SEEDS) and ref.comparable["tokens_per_step"] == 8 * 128
    assert ref.band.first_step == 8 and ref.recorded.settings["nprocs_per_node"] == 1
    assert ref.mean[0] - ref.mean[-1] > 1.0  # the Markov data is learnt: from ln(1024) = 6.93 down
    assert all(0 < s < 0.05 for s in ref.std[1:]), ref.std  # seed noise, not zero, not chaos


def test_another_data_seed_of_one_process_passes(runs):
    _passed(runs.check(runs.train("fresh_seed", RUN_SEED)))


@pytest.mark.parametrize("layout", ["ddp", "zero2"])
def test_ddp_and_zero2_on_two_ranks_pass_against_the_one_process_reference(runs, layout):
    verdict = runs.check(runs.launched("torch", layout))
    _passed(verdict)
    assert "nprocs_per_node: 1 vs 2" in verdict.differing
    assert ("parallel.sharding: 'none' vs 'stage2'" in verdict.differing) == (layout == "zero2")


def test_paddle_passes_against_the_torch_reference(runs):
    verdict = runs.check(runs.launched("paddle", "paddle"))
    _passed(verdict)
    assert "framework: 'torch' vs 'paddle'" in verdict.differing


def test_ten_times_the_learning_rate_fails(runs):
    verdict = runs.check(runs.train("lr_x10", RUN_SEED, "train.lr=1e-2"))
    _failed(verdict, "steps from step 8 outside", "mean relative error")
    assert len(verdict.outside) == len(verdict.steps) and "train.lr: 0.001 vs 0.01" in verdict.differing


def test_a_learning_rate_near_zero_fails_as_a_loss_that_does_not_move(runs):
    verdict = runs.check(runs.train("lr_zero", RUN_SEED, "train.lr=1e-9"))
    _failed(verdict, "loss fell", "mean relative error", "outside")
    assert abs(verdict.run_drop) < 0.05 * verdict.reference_drop


def test_gradient_noise_fails_from_a_relative_half(runs):
    _passed(runs.check(runs.train("noise_passes", RUN_SEED, f"debug.grad_noise={GRAD_NOISE_PASSES}")))
    verdict = runs.check(runs.train("noise_fails", RUN_SEED, f"debug.grad_noise={GRAD_NOISE_FAILS}"))
    _failed(verdict, "outside")
    assert f"debug.grad_noise: 0.0 vs {GRAD_NOISE_FAILS}" in verdict.differing


def test_fp16_without_loss_scaling_passes_here_and_fails_where_gradients_underflow(runs, monkeypatch):
    import torch

    from training.torch import precision

    def scaler(scale):
        return lambda self, shards_gradients: torch.amp.GradScaler(
            "cpu", enabled=scale is not None, init_scale=scale or 1.0, growth_interval=2 ** 30)

    monkeypatch.setattr(precision.Precision, "grad_scaler", scaler(None))  # no loss scaling
    unscaled = runs.check(runs.train("fp16_unscaled", RUN_SEED, "train.precision=fp16"))
    _passed(unscaled)
    assert "train.precision: 'fp32' vs 'fp16'" in unscaled.differing
    monkeypatch.setattr(precision.Precision, "grad_scaler", scaler(FP16_UNDERFLOW))
    verdict = runs.check(runs.train("fp16_underflow", RUN_SEED, "train.precision=fp16"))
    _failed(verdict, "outside", "mean relative error")
    assert verdict.run_drop < 0.75 * verdict.reference_drop


@pytest.mark.parametrize("settings, case_name, differs", [
    (("train.micro_batch_size=4",), ONE, "tokens_per_step: 1024 vs 512"),
    ((), "gpt2_tiny:torch:cpu:1:1", "model.family: 'gpt3' vs 'gpt2'"),
])
def test_a_run_of_another_batch_or_model_is_refused_with_what_differs(runs, settings, case_name, differs):
    run = runs.train(f"other_{len(settings)}", RUN_SEED, *settings, case_name=case_name)
    verdict = loss_check.check_run(run, loss_reference.LossReferenceFile(curves=[runs.reference]), "the file")
    assert verdict.refused and not verdict.passed and verdict.verdict.startswith("not comparable")
    assert verdict.refused == f"reference vs run differ in {differs}" and math.isnan(verdict.mean_rel_error)

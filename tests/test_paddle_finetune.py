"""Paddle finetune and LoRA, in-process on one CPU rank, against the torch worker.

Both workers batch instruction data through ``training/data/batches.py``, so
their batches and step counts are the same by construction; these tests check
that the Paddle worker reports them exactly, that its LoRA trains the adapters
alone, and that a torch and a Paddle LoRA run from one weights file
(``train.init_weights``; adapters from ``training/adapters.py``) agree loss for
loss within tests/test_parity.py's tolerances: 5e-6 absolute on losses,
1e-5 relative on gradient norms (measured 2026-11-25: at most 9.5e-7 on losses and
6e-7 relative on norms, over llama_tiny_lora, bloom_tiny_lora and llama_tiny_sft). The multi-rank parities (tensor parallel 2,
sharding 2) need launches: tests/test_paddle.py (e2e).
"""
from __future__ import annotations

import numpy as np
import paddle  # dev setup installs it: a paddle that fails to import fails these tests, never skips them
import pytest
import torch

from training import harness
from training.contract import flops
from training.data.instruction import PAD

from .test_parity import assert_trajectories_match
from .test_plan import build

FEW = ("train.steps=3", "train.warmup_steps=1", "data.records=24", "train.micro_batch_size=2")


def _config(root, tmp_path, name: str, *settings: str):
    (case,) = build(root, tmp_path, name, assignments=(*FEW, *settings)).cases
    return case.rounds[0].worker_config


def _paddle(root, tmp_path, case: str, *settings: str):
    from training.paddle.train import PaddleWorker

    return PaddleWorker(_config(root, tmp_path, f"{case}:paddle:cpu:1:1", *settings), harness.Ranks(0, 1, 0, 0))


def _torch(root, tmp_path, case: str, *settings: str):
    from training.torch.train import TorchWorker

    return TorchWorker(_config(root, tmp_path, f"{case}:torch:cpu:1:1", *settings), harness.Ranks(0, 1, 0, 0))


def _recording(worker) -> list:
    """Every micro-batch the worker takes from here on."""
    batches, next_batch = [], worker.data.next_batch
    worker.data.next_batch = lambda: batches.append(next_batch()) or batches[-1]
    return batches


@pytest.mark.parametrize("case, per_block", [
    ("llama_tiny_lora", 8 * ((128 + 128) + (128 + 64))),  # rank 8 on q (128 -> 128) and v (128 -> 64, GQA)
    ("bloom_tiny_lora", 8 * ((128 + 128) + (128 + 128))),
])
def test_paddle_lora_trains_the_adapters_alone(root, tmp_path, case, per_block):
    worker = _paddle(root, tmp_path, case)
    named = dict(worker.model.named_parameters())
    adapters = {name for name in named if ".lora_" in name}
    assert worker.trainable_params == 2 * per_block == sum(named[n].size for n in adapters)
    assert {id(p) for p in worker.optimizer._parameter_list} == {id(named[n]) for n in adapters}
    before = {name: p.numpy().copy() for name, p in named.items()}
    assert not before[next(n for n in adapters if n.endswith("lora_b.weight"))].any()  # B = 0: the base model
    for _ in range(2):
        worker.after_step(worker.train_step())
    for name, param in named.items():
        if name in adapters:
            if name.endswith("lora_b.weight"):  # A's gradient is B-weighted: zero at step 0, so B must move
                assert not np.array_equal(param.numpy(), before[name]), f"adapter {name} did not train"
        else:
            assert np.array_equal(param.numpy(), before[name]), f"{name} changed"
    assert any(not np.array_equal(named[n].numpy(), before[n]) for n in adapters if n.endswith("lora_a.weight"))


@pytest.mark.parametrize("case", ["llama_tiny_sft", "bloom_tiny_lora"])
def test_effective_tokens_are_exactly_the_padding_free_tokens_of_the_shared_batches(root, tmp_path, case):
    settings = ("train.gradient_accumulation_steps=2", "model.seq_len=1024")  # room: no sample is cut
    paddle_worker, torch_worker = _paddle(root, tmp_path, case, *settings), _torch(root, tmp_path, case, *settings)
    seen = {"paddle": _recording(paddle_worker), "torch": _recording(torch_worker)}
    for _ in range(2):
        work = {"paddle": paddle_worker.train_step(), "torch": torch_worker.train_step()}
        for framework, worker in (("paddle", paddle_worker), ("torch", torch_worker)):
            batches = seen[framework][-2:]
            real = sum(int(np.count_nonzero(b.inputs != PAD)) for b in batches)  # no real token is 0
            assert real == work[framework].effective_tokens < work[framework].tokens
            assert work[framework].tokens == sum(b.inputs.size for b in batches)
            spec = worker.spec
            assert work[framework].flops == sum(
                int(np.count_nonzero(b.inputs != PAD))
                * flops.flops_per_token(spec.model.model_copy(update={"seq_len": b.inputs.shape[1]}), spec.train)[0]
                for b in batches)
            worker.after_step(work[framework])
        assert (work["paddle"].effective_tokens, work["paddle"].tokens, work["paddle"].flops) == \
               (work["torch"].effective_tokens, work["torch"].tokens, work["torch"].flops)
    for mine, theirs in zip(seen["paddle"], seen["torch"], strict=True):  # one data side: the same batches
        assert np.array_equal(mine.inputs, theirs.inputs) and np.array_equal(mine.targets, theirs.targets)


@pytest.mark.parametrize("case", ["llama_tiny_lora", "bloom_tiny_lora", "llama_tiny_sft"])
def test_torch_and_paddle_from_the_same_weights_agree_loss_for_loss(root, tmp_path, case):
    """From one ``train.init_weights`` file (adapters from their seeds: ``training/adapters.py``), 3 steps of
    single-process LoRA (and a full finetune) give losses within 5e-6 absolute and gradient norms within
    1e-5 relative (tests/test_parity.py's TOLERANCE and GRAD_NORM_TOLERANCE, measured for pretraining)."""
    from training.torch.weights import write_initial_weights

    spec = _config(root, tmp_path, f"{case}:torch:cpu:1:1").workload
    weights = write_initial_weights(spec.model, seed=spec.train.seed, path=tmp_path / "init.npz")
    settings = (f"train.init_weights={weights}", "train.lr=1e-3", "train.gradient_accumulation_steps=2")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # fp32 sums in one order per framework, as the launched parity tests run
    try:
        trajectories = {}
        for framework, open_worker in (("torch", _torch), ("paddle", _paddle)):
            worker = open_worker(root, tmp_path, case, *settings)
            trajectories[framework] = [worker.after_step(worker.train_step()) for _ in range(3)]
    finally:
        torch.set_num_threads(threads)
    assert_trajectories_match(trajectories["paddle"], trajectories["torch"], f"{case}: paddle vs torch")
    assert paddle.get_default_dtype() == "float32"

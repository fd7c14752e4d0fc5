"""TorchWorker's choices that matter on an accelerator, checked on the CPU: FSDP2's mixed precision, when
gradients are reduced under accumulation, the offload process group, a process group made before the worker
(reused, left alone), compiles after warm-up, and the FLOPs of padded instruction batches."""
from __future__ import annotations

import pytest
import torch

from training.contract.spec import DeviceSpec
from training.torch.data import as_tensors
from training.torch.device import process_group_backend

from .torch_ranks import open_worker, run_ranks, worker_config

GPT2 = dict(n_layer=2, n_head=4, d_model=64, vocab_size=256, seq_len=32)
LLAMA_SFT = dict(family="llama", n_layer=2, n_head=4, n_kv_head=2, d_model=128, d_ff=344, vocab_size=512,
                 seq_len=512, norm="rmsnorm", activation="swiglu", position="rotary", bias=False,
                 tie_embeddings=False)
SFT_DATA = {"source": "synthetic_instruction", "records": 64}


def _mixed_precision_rank(rank: int, world: int, cfg) -> dict:
    from torch.distributed.fsdp import FSDPModule

    worker = open_worker(rank, world, cfg)
    try:
        policies = {(m._get_fsdp_state()._mp_policy.param_dtype, m._get_fsdp_state()._mp_policy.reduce_dtype)
                    for m in worker.parallel.model.modules() if isinstance(m, FSDPModule)}
        loss, _ = worker.after_step(worker.train_step())  # the policy runs: gathers in bf16 over gloo
        return {"policies": policies, "loss": loss}
    finally:
        worker.close()


@pytest.mark.parametrize("precision, param_dtype, reduce_dtype", [("bf16", torch.bfloat16, torch.float32),
                                                                   ("fp32", None, None)])
def test_fsdp_gathers_in_the_low_precision_and_reduces_in_fp32(precision, param_dtype, reduce_dtype):
    cfg = worker_config(GPT2, dict(micro_batch_size=2, steps=2, warmup_steps=1, precision=precision),
                        {"sharding": "stage2"})
    for rank in run_ranks(_mixed_precision_rank, 2, cfg):
        assert rank["policies"] == {(param_dtype, reduce_dtype)}  # every block and the root
        assert 5 < rank["loss"] < 6  # ln(256) = 5.5: trained, not NaN


def _sync_rank(rank: int, world: int, cfg) -> dict:
    worker = open_worker(rank, world, cfg)
    try:
        batch, model = worker.data.next_batch(), worker.parallel.model
        with worker.parallel.gradient_sync(False):  # a micro-batch that is not the step's last
            model(*as_tensors(batch), reduction="sum").backward()
        return {"sharded_grads_after_first": all(p.grad is not None for p in model.parameters()),
                "reported": worker.environment().get("sync_gradients_each_micro_batch")}
    finally:
        worker.close()


@pytest.mark.parametrize("each", [True, False])
def test_fsdp_gradient_reduction_under_accumulation_is_the_reported_choice(each):
    cfg = worker_config(GPT2, dict(micro_batch_size=2, gradient_accumulation_steps=2, steps=2, warmup_steps=1),
                        {"sharding": "stage3", "sync_gradients_each_micro_batch": each})
    for rank in run_ranks(_sync_rank, 2, cfg):
        # Each micro-batch reduce-scattered: gradient shards after the first one; otherwise FSDP holds the
        # full unsharded gradients until the last one, and no parameter has a (sharded) gradient yet.
        assert rank["sharded_grads_after_first"] is each
        assert rank["reported"] is each


def test_default_is_to_reduce_each_micro_batch():
    from training.contract.spec import ParallelSpec

    assert ParallelSpec().sync_gradients_each_micro_batch is True


@pytest.mark.parametrize("device, backend, offload, expected", [
    (torch.device("cuda", 0), None, True, "cuda:nccl,cpu:gloo"),
    (torch.device("cuda", 0), None, False, "nccl"),
    (torch.device("xpu", 3), "xccl", True, "xpu:xccl,cpu:gloo"),  # the kind names its backend
    (torch.device("cpu"), None, True, "gloo"),  # the device is the CPU: gloo already
])
def test_offload_adds_gloo_for_the_cpu_to_the_device_backend(device, backend, offload, expected):
    spec = DeviceSpec(kind="x", torch_device=device.type, backend=backend)
    assert process_group_backend(spec, device, offload) == expected


def _own_group_rank(rank: int, world: int, cfg) -> dict:
    import torch.distributed as dist

    worker = open_worker(rank, world, cfg)  # as in a run: the worker makes the group, and tears it down
    owned = worker.owns_process_group
    worker.close()
    return {"owned": owned, "gone_after_close": not dist.is_initialized()}


def _shared_group_rank(rank: int, world: int, cfg) -> dict:
    import torch.distributed as dist

    from training.torch import device as devices

    # tests/parity_worker.py: one group made before the workers; each reuses it and leaves it be. (A second
    # group after destroying the first would rendezvous again through the same store: not done here.)
    facts = {"made_here": devices.init_process_group(cfg.runtime.device, torch.device("cpu"))}
    for _ in range(2):
        worker = open_worker(rank, world, cfg)
        facts["reused"] = not worker.owns_process_group
        worker.after_step(worker.train_step())
        worker.close()
        facts["kept_after_close"] = dist.is_initialized()
    try:  # a worker that needs a backend the group lacks is refused, not silently given gloo
        devices.init_process_group(DeviceSpec(kind="x", backend="nccl"), torch.device("cpu"))
    except RuntimeError as exc:
        facts["refused"] = str(exc)
    dist.destroy_process_group()
    return facts


def test_a_worker_reuses_a_process_group_made_before_it_and_leaves_it_alone():
    cfg = worker_config(GPT2, dict(micro_batch_size=2, steps=2, warmup_steps=1), {"sharding": "stage1"})
    for rank in run_ranks(_own_group_rank, 2, cfg, timeout=120):
        assert rank == {"owned": True, "gone_after_close": True}
    for rank in run_ranks(_shared_group_rank, 2, cfg, timeout=120):
        assert rank["made_here"] and rank["reused"] and rank["kept_after_close"]
        assert "this worker needs {'cuda': 'nccl'}" in rank["refused"]


def test_instruction_flops_count_real_tokens_only():
    cfg = worker_config(LLAMA_SFT, dict(micro_batch_size=2, gradient_accumulation_steps=2, steps=2,
                                        warmup_steps=1), data=SFT_DATA, task="finetune")
    worker = open_worker(0, 1, cfg)
    batches, next_batch = [], worker.data.next_batch
    worker.data.next_batch = lambda: batches.append(next_batch()) or batches[-1]
    work = worker.train_step()
    real = sum(b.real_tokens * worker.flops_at_width(b.inputs.shape[1]) for b in batches)
    padded = sum(b.padded_tokens * worker.flops_at_width(b.inputs.shape[1]) for b in batches)
    assert real < padded  # the batches had padding
    assert work.flops == real


def _compile_rank(rank: int, world: int, cfg) -> dict:
    worker = open_worker(rank, world, cfg)
    widths, next_batch = [], worker.data.next_batch

    def recorded():
        batch = next_batch()
        widths.append(batch.inputs.shape[1])
        return batch

    worker.data.next_batch = recorded
    before = worker.recompiles()
    for _ in range(cfg.workload.train.steps):
        worker.after_step(worker.train_step())
    return {"widths": widths, "before": before, "recompiles": worker.recompiles()}


def test_compile_with_varying_widths_compiles_in_warmup_and_counts_recompiles():
    cfg = worker_config(LLAMA_SFT, dict(micro_batch_size=2, steps=4, warmup_steps=1, compile="default"),
                        data=SFT_DATA, task="finetune")
    (rank,) = run_ranks(_compile_rank, 1, cfg, timeout=540)
    assert len(set(rank["widths"][1:]) - {rank["widths"][0]}) >= 1  # measured steps saw new widths
    assert rank["before"] is None  # no measured step yet
    assert rank["recompiles"] == 0


def test_not_compiling_reports_no_recompile_count():
    cfg = worker_config(GPT2, dict(micro_batch_size=2, steps=2, warmup_steps=1))
    worker = open_worker(0, 1, cfg)
    worker.after_step(worker.train_step())
    worker.after_step(worker.train_step())
    assert worker.recompiles() is None


def test_end_record_carries_the_recompile_count():
    from training.contract import perflog

    record = perflog.EndRecord(rank=0, steps=4, peak_memory_bytes=1, memory_total_bytes=None, memory_kind="rss",
                               recompiles=2)
    assert perflog.parse_line(perflog.format_record(record)).recompiles == 2
    assert perflog.from_payload({"v": 2, "kind": "end", "rank": 0, "steps": 4, "peak_memory_bytes": 1,
                                 "memory_total_bytes": None, "memory_kind": "rss"}).recompiles is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_gradient_norm_is_the_float64_sum_of_squares_of_every_gradient(dtype):
    """The norm each step record carries (parity tests compare it across frameworks), in one fused float64
    reduction per gradient: the same figure as squaring a float64 copy, to float64 rounding."""
    from training.torch.pipeline import squared_norm

    generator = torch.Generator().manual_seed(0)
    grads = [(torch.randn(shape, generator=generator) * 100).to(dtype) for shape in ((257, 31), (1000,), (3, 5, 7))]
    exact = sum(float((g.double() ** 2).sum()) for g in grads)
    got = squared_norm(grads, torch.device("cpu"))
    assert got.dtype == torch.float64 and float(got) == pytest.approx(exact, rel=1e-12)

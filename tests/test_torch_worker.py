"""TorchWorker's choices that matter on an accelerator, checked on the CPU: FSDP2's mixed precision, when
gradients are reduced under accumulation, the offload process group, a process group made before the worker
(reused, left alone), compiles after warm-up, and the FLOPs of padded instruction batches.

Every worker on real ranks runs in tests/torch_pairs.py's one spawn of two: the one that makes its own group
(before the spawn's group exists), the compiled one (one rank's, on rank 0 alone), then those on the shared
group; each had a spawn of its own before (~9 and ~5 s of CPU for the ranks' imports alone)."""
from __future__ import annotations

import pytest
import torch

from training.contract.spec import DeviceSpec
from training.torch.data import as_tensors
from training.torch.device import process_group_backend

from .torch_ranks import open_worker, worker_config

GPT2 = dict(n_layer=2, n_head=4, d_model=64, vocab_size=256, seq_len=32)
LLAMA_SFT = dict(family="llama", n_layer=2, n_head=4, n_kv_head=2, d_model=128, d_ff=344, vocab_size=512,
                 seq_len=512, norm="rmsnorm", activation="swiglu", position="rotary", bias=False,
                 tie_embeddings=False)
SFT_DATA = {"source": "synthetic_instruction", "records": 64}
COMPILED = worker_config(LLAMA_SFT, dict(micro_batch_size=2, steps=4, warmup_steps=1, compile="default"),
                         data=SFT_DATA, task="finetune")


def _mixed_precision(worker) -> dict:
    from torch.distributed.fsdp import FSDPModule

    policies = {(m._get_fsdp_state()._mp_policy.param_dtype, m._get_fsdp_state()._mp_policy.reduce_dtype)
                for m in worker.parallel.model.modules() if isinstance(m, FSDPModule)}
    loss, _ = worker.after_step(worker.train_step())  # the policy runs: gathers in bf16 over gloo
    return {"policies": policies, "loss": loss}


def _sync(worker) -> dict:
    batch, model = worker.data.next_batch(), worker.parallel.model
    with worker.parallel.gradient_sync(False):  # a micro-batch that is not the step's last
        model(*as_tensors(batch), reduction="sum").backward()
    return {"sharded_grads_after_first": all(p.grad is not None for p in model.parameters()),
            "reported": worker.environment().get("sync_gradients_each_micro_batch")}


def _trained(worker) -> dict:
    worker.after_step(worker.train_step())
    return {}


PRECISIONS = {"bf16": (torch.bfloat16, torch.float32), "fp32": (None, None)}
SHARED_GROUP = worker_config(GPT2, dict(micro_batch_size=2, steps=2, warmup_steps=1), {"sharding": "stage1"})


def _shared_group_rank(rank: int, world: int, configs: list) -> dict:
    """On a group made before the workers (tests/torch_pairs.py makes it, as tests/parity_worker.py does): first,
    on rank 0 alone, the compiled worker of one rank (COMPILED; nothing compiled before it in the process, rank 1
    waiting at its first worker's collectives); then each worker in turn (the stage1 one twice) reuses the
    group and leaves it be, and reports what its test checks."""
    import torch.distributed as dist

    from training.torch import device as devices

    facts = {"compiled": _compile_rank(0, 1, COMPILED) if rank == 0 else None, "workers": {}}
    for name, check, cfg in configs:
        worker = open_worker(rank, world, cfg)
        try:
            facts["workers"][name] = {**check(worker), "owned": worker.owns_process_group}
        finally:
            worker.close()
        facts["workers"][name]["kept_after_close"] = dist.is_initialized()
    try:  # a worker that needs a backend the group lacks is refused, not silently given gloo
        devices.init_process_group(DeviceSpec(kind="x", backend="nccl"), torch.device("cpu"))
    except RuntimeError as exc:
        facts["refused"] = str(exc)
    return facts


def _own_group_rank(rank: int, world: int) -> dict:
    """Before the spawn's group exists (tests/torch_pairs.py), as in a run: the worker makes the group, and
    tears it down at close."""
    import torch.distributed as dist

    worker = open_worker(rank, world, SHARED_GROUP)
    owned = worker.owns_process_group
    worker.close()
    return {"owned": owned, "gone_after_close": not dist.is_initialized()}


def two_torch_ranks():
    """This module's part of tests/torch_pairs.py's shared spawn of two ranks: before its group, a worker that
    makes its own; then on rank 0 alone the compiled worker; FSDP2's mixed precision (bf16, fp32), its gradient
    reduction under accumulation (each micro-batch or the last), and stage1 twice."""
    configs = [(f"precision:{p}", _mixed_precision, worker_config(GPT2, dict(
        micro_batch_size=2, steps=2, warmup_steps=1, precision=p), {"sharding": "stage2"})) for p in PRECISIONS]
    configs += [(f"sync:{each}", _sync, worker_config(GPT2, dict(
        micro_batch_size=2, gradient_accumulation_steps=2, steps=2, warmup_steps=1),
        {"sharding": "stage3", "sync_gradients_each_micro_batch": each})) for each in (True, False)]
    configs += [(f"stage1:{n}", _trained, SHARED_GROUP) for n in (1, 2)]
    return _shared_group_rank, configs, _own_group_rank


@pytest.fixture(scope="module")
def shared_group(torch_pairs) -> list[dict]:
    """Per rank, what each worker on the shared group reported, whether the group was made before them, and
    what the worker that made its own group before it reported."""
    return [{**rank["test_torch_worker"], "made_here": rank["made_here"],
             "own_group": rank["before_the_group"]["test_torch_worker"]} for rank in torch_pairs]


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_fsdp_gathers_in_the_low_precision_and_reduces_in_fp32(shared_group, precision):
    for rank in shared_group:
        facts = rank["workers"][f"precision:{precision}"]
        assert facts["policies"] == {PRECISIONS[precision]}  # every block and the root
        assert 5 < facts["loss"] < 6  # ln(256) = 5.5: trained, not NaN


@pytest.mark.parametrize("each", [True, False])
def test_fsdp_gradient_reduction_under_accumulation_is_the_reported_choice(shared_group, each):
    for rank in shared_group:
        # Each micro-batch reduce-scattered: gradient shards after the first one; otherwise FSDP holds the
        # full unsharded gradients until the last one, and no parameter has a (sharded) gradient yet.
        assert rank["workers"][f"sync:{each}"]["sharded_grads_after_first"] is each
        assert rank["workers"][f"sync:{each}"]["reported"] is each


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


def test_a_worker_reuses_a_process_group_made_before_it_and_leaves_it_alone(shared_group):
    for rank in shared_group:
        assert rank["own_group"] == {"owned": True, "gone_after_close": True}  # before the spawn's group
        assert rank["made_here"] and "this worker needs {'cuda': 'nccl'}" in rank["refused"]
        workers = rank["workers"]
        assert {"stage1:1", "stage1:2"} <= set(workers) and len(workers) == 6
        for name, facts in workers.items():  # reused, and left alone at close
            assert not facts["owned"] and facts["kept_after_close"], name


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
    """The compiled worker's steps, the widths of its batches, its recompile count before and after them."""
    worker = open_worker(rank, world, cfg)
    widths, next_batch = [], worker.data.next_batch

    def recorded():
        batch = next_batch()
        widths.append(batch.inputs.shape[1])
        return batch

    worker.data.next_batch = recorded
    try:
        before = worker.recompiles()
        for _ in range(cfg.workload.train.steps):
            worker.after_step(worker.train_step())
        return {"widths": widths, "before": before, "recompiles": worker.recompiles()}
    finally:
        worker.close()
        # A run compiles one model per process. Here dynamo's state per code object (the blocks' forward, with
        # the dynamic widths it learned) would carry into the next compiled worker of the spawn (test_breakdown_tp's
        # TP blocks: tracing them with symbolic widths ended in a RecursionError): forget it, as a new process.
        torch._dynamo.reset()


def test_compile_with_varying_widths_compiles_in_warmup_and_counts_recompiles(shared_group):
    """One rank's compiled worker, trained on rank 0 of tests/torch_pairs.py's spawn first (a spawn of its own
    cost a rank's imports, and inductor's vector-ISA check and precompiled header, which the compiled TP
    blocks of tests/test_breakdown_tp.py in the same process now reuse)."""
    rank = shared_group[0]["compiled"]
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

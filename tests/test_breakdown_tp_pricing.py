"""Tensor parallel's breakdown in-process: the expected communication of recorded TP collectives (each at
its own group's stored busbw), the by-construction count of an unmeasured round (torch's, and Paddle's with its
embedding's, head's and loss's collectives), the records' per-collective group sizes, which ops the worker's
dispatch mode times and at which message size, and what stays "not measured" with its reason. The ranks
themselves run in tests/test_breakdown_tp.py (Paddle's: tests/test_paddle_breakdown_fleet_launch.py)."""
from __future__ import annotations

import json
import math

import pytest

from run_benchmarks.results.breakdown import step as breakdown
from training.contract import perflog

from .test_breakdown_sharded_views import micro_row


MEASURE = "accelbench run {op}:torch:cpu:1:4"
NODES = [{"host": "h", "environment": {"hostname": "h"}}]
METRICS = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.005}


def workload(parallel: dict, model: dict | None = None, train: dict | None = None):
    from training.contract.spec import WorkloadSpec

    return WorkloadSpec.model_validate({
        "model": {"n_layer": 3, "n_head": 2, "d_model": 64, "vocab_size": 128, "seq_len": 32, **(model or {})},
        "train": {"micro_batch_size": 2, "gradient_accumulation_steps": 2, "precision": "bf16", "steps": 2,
                  "warmup_steps": 1, **(train or {})},
        "parallel": parallel})


def tp_record(rank: int, ops, sizes, group_sizes, group: int = 1) -> perflog.BreakdownRecord:
    return perflog.BreakdownRecord(rank=rank, steps=2, data_s=[0.001] * 2, compute_s=[0.05] * 2, wait_s=[0.0] * 2,
                                   communication_s=[0.02] * 2, optimizer_s=[0.002] * 2, step_s=[0.08] * 2,
                                   bucket_bytes=list(sizes), collective_ops=list(ops), group_size=group,
                                   group_sizes=list(group_sizes), method="m")


def test_a_measured_tensor_parallel_round_prices_its_recorded_collectives_exactly():
    """TP2 alone: the record's group_size is data parallel's 1, each collective's own group is 2; the expected
    communication is each recorded collective's bytes x 2(n-1)/n (all-reduce) or (n-1)/n / the stored busbw of
    its operation for 2 ranks at the nearest size. The by-construction count is not used."""
    activation, norm = 4096, 128
    ops = ["allreduce"] * 12 + ["allgather", "reducescatter"] + ["allreduce"]
    sizes = [activation] * 14 + [norm]
    records = [tp_record(r, ops, sizes, [2] * len(ops)) for r in (0, 1)]
    rows = [micro_row("allreduce", [(128, 0.5), (4096, 2.0)]), micro_row("allgather", [(4096, 3.0)]),
            micro_row("reducescatter", [(4096, 1.5)]), micro_row("allreduce", [(4096, 9.0)], ranks=4)]
    by_construction = ([("allreduce", activation)] * 999, 2, "never used: the round was measured")
    tb = breakdown.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES, rows, MEASURE, by_construction)
    assert tb["measured"]["group_sizes"] == [2] * 15 and tb["measured"]["collectives"] == 15
    assert tb["expected"]["communication_s"] == math.fsum(
        [activation * 2 * 1 / 2 / 2e9] * 12 + [activation * 1 / 2 / 3e9, activation * 1 / 2 / 1.5e9,
                                               norm * 2 * 1 / 2 / 0.5e9])
    assert "never used" not in tb["expected"]["communication_formula"] and tb["expected"]["missing"] == []
    assert {b["ranks"] for b in tb["expected"]["busbw"]} == {2}


def test_fsdp_beside_tensor_parallel_prices_each_collective_at_its_own_groups_busbw():
    """TP2 x FSDP over 4 data-parallel ranks (8 ranks): DTensor's all-reduces at the 2-rank busbw, FSDP's
    all-gather at the 4-rank one; a missing figure names the case of that group's size."""
    records = [tp_record(0, ["allreduce", "allgather"], [1 << 20, 8 << 20], [2, 4], group=4)]
    rows = [micro_row("allreduce", [(1 << 20, 2.0)], ranks=2), micro_row("allgather", [(8 << 20, 4.0)], ranks=4)]
    command = "accelbench run {op}:torch:cpu:1:8"
    tb = breakdown.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES, rows, command)
    assert tb["expected"]["communication_s"] == math.fsum([(1 << 20) * 2 * 1 / 2 / 2e9, (8 << 20) * 3 / 4 / 4e9])
    lacking = breakdown.time_breakdown(records, METRICS, (10.0, "c"), (None, ""), NODES, rows[1:], command)
    assert lacking["expected"]["communication_s"] is None
    assert lacking["expected"]["missing"] == ["no all-reduce busbw stored for 2 ranks on these hosts: run "
                                              "`accelbench run allreduce:torch:cpu:1:2`"]
    assert breakdown.command("accelbench run {op}:torch:h100:2:8", "allgather", 16) == \
        "accelbench run allgather:torch:h100:2:8"
    assert breakdown.command("accelbench run {op}:torch:h100:4:8", "allgather", 16) == \
        "accelbench run allgather:torch:h100:2:8"


def test_an_unmeasured_tensor_parallel_round_is_still_priced_by_construction():
    from run_benchmarks.results.breakdown import layouts as breakdown_layouts

    collectives, tp, text = breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2}), 2)
    skipped = [perflog.BreakdownRecord(rank=r, steps=0, not_measured="train.breakdown_steps is 0") for r in (0, 1)]
    activation = 2 * 32 * 64 * 2
    tb = breakdown.time_breakdown(skipped, METRICS, (10.0, "c"), (None, ""), NODES,
                                  [micro_row("allreduce", [(activation, 2.0)])], MEASURE, (collectives, tp, text))
    assert tb["expected"]["communication_s"] == math.fsum([activation * 2 * 1 / 2 / 2e9] * (6 * 3 * 2))
    assert tb["expected"]["communication_formula"].startswith("tensor parallel: per block and micro-batch 2 ")
    swiglu, _, _ = breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2},
                                                              model={"activation": "swiglu"}), 2)
    assert len(swiglu) == 7 * 3 * 2  # gate is one more column-parallel projection


def test_paddles_by_construction_count_adds_its_embedding_head_and_loss_collectives():
    """Where Paddle's tensor parallel is not measured (an accelerator), it is priced by construction: the blocks'
    count (torch's) plus, per micro-batch, the vocab-parallel embedding's and the head's all-reduces of the
    activations (sequence parallel: and 2 all-gathers), and the parallel cross-entropy's 3 all-reduces of
    micro_batch_size x seq_len fp32 values."""
    from run_benchmarks.results.breakdown import layouts as breakdown_layouts

    act, loss = 2 * 32 * 64 * 2, 2 * 32 * 4  # bf16 activations; the loss in fp32
    plain = workload({"tensor_parallel_degree": 2})
    torch_count, _, _ = breakdown_layouts.tensor_parallel(plain, 2)
    paddle_count, tp, text = breakdown_layouts.tensor_parallel(plain, 2, "paddle")
    assert len(torch_count) == 6 * 3 * 2 and tp == 2
    assert paddle_count == ([("allreduce", act)] * (6 * 3 + 2) + [("allreduce", loss)] * 3) * 2
    assert "paddle adds per micro-batch the vocab-parallel embedding's all-reduce" in text
    sp, _, _ = breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2, "sequence_parallel": True}),
                                                 2, "paddle")
    assert sp == ([(op, act) for op in ["allgather", "reducescatter"] * 4 * 3 + ["allreduce", "allgather",
                                                                              "allgather", "allreduce"]]
                  + [("allreduce", loss)] * 3) * 2


@pytest.mark.parametrize("bad", [[2], [2, 0], [2, True], "22", [2, 2.0]])
def test_group_sizes_must_hold_one_positive_integer_per_collective(bad):
    good = tp_record(0, ["allreduce", "allgather"], [10, 20], [2, 4])
    assert perflog.from_payload(json.loads(perflog.format_record(good)[len(perflog.PREFIX):])) == good
    payload = {"v": perflog.SCHEMA_VERSION, **{**good.__dict__, "group_sizes": bad}}
    with pytest.raises(perflog.PerfLogError, match="group_sizes must hold one positive integer per collective"):
        perflog.from_payload(payload)
    older = {k: v for k, v in good.__dict__.items() if k != "group_sizes"}  # before group_sizes: all group_size
    assert breakdown.measured([perflog.BreakdownRecord(**older)], None)["group_sizes"] == [1, 1]


def test_every_functional_collective_is_intercepted_at_nccl_tests_message_size():
    import torch

    from training.torch.breakdown_tp import COLLECTIVES, message, operation

    names = [name for names in COLLECTIVES.values() for name in names]
    assert [operation(n) for n in ("all_reduce_", "all_gather_into_tensor_out", "reduce_scatter_tensor_coalesced",
                                   "all_to_all_single", "shard_dim_alltoall", "broadcast_")] == \
        ["allreduce", "allgather", "reducescatter", "alltoall", "alltoall", "broadcast"]
    assert {operation(n) for n in names} <= set(breakdown.BUS_FACTORS)  # every one has a price
    # this torch's functional collectives are all covered (point-to-point and wait_tensor are no collective)
    import torch.distributed._functional_collectives  # noqa: F401 - registers the ops

    listed = {n.split("::")[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("_c10d_functional::")}
    assert listed - set(COLLECTIVES["_c10d_functional"]) <= {"wait_tensor", "isend", "irecv", "batch_p2p_ops",
                                                            "_wrap_tensor_autograd"}
    f = torch.ops._c10d_functional
    shard = torch.zeros(4, 8)  # 128 bytes on each of 4 ranks
    assert message("allgather", f.all_gather_into_tensor.default, (shard, 4, "g"), {}) == (512, 4, "g")  # the whole
    assert message("reducescatter", f.reduce_scatter_tensor.default, (shard, "sum", 4, "g"), {}) == (128, 4, "g")
    pair = [torch.zeros(3), torch.zeros(5, dtype=torch.bfloat16)]
    named = {"group_size": 2, "group_name": "g"}  # keywords too
    assert message("allgather", f.all_gather_into_tensor_coalesced.default, (pair,), named) == (44, 2, "g")


def test_what_stays_uncovered_says_why():
    from types import SimpleNamespace

    from training.torch import breakdown as torch_breakdown, breakdown_tp

    spec = workload({"tensor_parallel_degree": 2}, train={"compile": "max-autotune"})
    why = breakdown_tp.uncovered(spec, on_cpu=False)
    assert why.startswith("not measured for tensor parallel with train.compile=max-autotune: its CUDA graphs")
    assert breakdown_tp.uncovered(spec, on_cpu=True) is None  # no CUDA graphs on a CPU
    assert breakdown_tp.uncovered(workload({"tensor_parallel_degree": 2}), on_cpu=False) is None
    tp = workload({"tensor_parallel_degree": 2})
    assert torch_breakdown.uncovered(tp, SimpleNamespace(pipeline=None)) is None  # measured now
    pipeline = SimpleNamespace(pipeline=object())
    assert torch_breakdown.uncovered(tp, pipeline).startswith("not measured for pipeline x tensor parallel: DTensor's")

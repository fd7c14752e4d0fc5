"""The measured time breakdown on real torch ranks (gloo on the CPU): injected costs land where they belong.

One spawn of two ranks measures a plain DDP worker and then one with every debug delay set (a second worker on
the same process group), so the test pays for one start of torch.
"""
from __future__ import annotations

import statistics

from .torch_ranks import open_worker, run_ranks, worker_config

MODEL = dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16)
TRAIN = dict(micro_batch_size=2, steps=2, warmup_steps=1)
COLLECTIVE_MS, DATA_MS, COMPUTE_MS = 100.0, 40.0, 150.0


def _measure(rank: int, world: int, cfg) -> dict:
    from training import breakdown

    worker = open_worker(rank, world, cfg)
    record = breakdown.measure(3, rank, worker.breakdown_phases(), lambda: None)
    return {"record": record, "worker": worker}


def _plain_then_delayed(rank: int, world: int, plain, delayed) -> tuple:
    first = _measure(rank, world, plain)
    second = _measure(rank, world, delayed)  # the process group exists: this worker does not own it
    second["worker"].close()
    first["worker"].close()
    return first["record"], second["record"]


def b0_gradient_bytes(model: dict) -> int:
    """fp32 gradient bytes of the model's parameters (GPT2: tied embedding, learned positions)."""
    from training.contract.spec import ModelSpec
    from training.torch.model import GPT
    import torch

    with torch.device("meta"):
        net = GPT(ModelSpec(**model))
    return sum(p.numel() for p in net.parameters()) * 4


def med(record, phase: str) -> float:
    return statistics.median(getattr(record, phase))


def test_injected_costs_land_in_their_phase_and_name_the_slow_rank():
    plain = worker_config(MODEL, TRAIN)
    delayed = plain.model_copy(update={"workload": plain.workload.model_copy(update={"debug": plain.workload.debug.
                               model_copy(update={"collective_delay_ms": COLLECTIVE_MS, "data_fetch_delay_ms": DATA_MS,
                                                  "compute_delay_ms": COMPUTE_MS, "fail_rank": 1})})})
    (a0, b0), (a1, b1) = run_ranks(_plain_then_delayed, 2, plain, delayed)
    collectives = len(b0.bucket_bytes)
    assert collectives >= 1 and b0.group_size == 2 and b0.bucket_bytes == a0.bucket_bytes == b1.bucket_bytes
    assert sum(b0.bucket_bytes) == b0_gradient_bytes(MODEL)  # every gradient, once
    grew = med(b0, "communication_s") - med(a0, "communication_s")
    # rank 0 also waits for rank 1 in the all-reduce only if rank 1 is late into it: it is not (compute is
    # timed apart), so its communication grows by the delay alone
    assert abs(grew - collectives * COLLECTIVE_MS / 1000) <= 0.2 * collectives * COLLECTIVE_MS / 1000
    # compute does not take the collective delay (a shared machine may add noise, never half the delay)
    assert med(b0, "compute_s") - med(a0, "compute_s") < 0.5 * COLLECTIVE_MS / 1000
    assert med(b0, "data_s") - med(a0, "data_s") >= DATA_MS / 1000  # a data-fetch delay lands in data
    assert med(b1, "compute_s") >= COMPUTE_MS / 1000  # the slow rank's own compute holds its delay
    from run_benchmarks.results.breakdown import measured

    assert measured([b0, b1], None)["straggler"]["rank"] == 1  # and the round names it
    assert measured([a0, a1], None)["per_rank"][1]["compute_s"] < COMPUTE_MS / 1000  # not without the delay


def test_one_process_has_no_communication():
    from training import breakdown
    from training.harness import Ranks
    from training.torch.train import TorchWorker

    worker = TorchWorker(worker_config(MODEL, TRAIN), Ranks(rank=0, world_size=1, local_rank=0, node_rank=0))
    record = breakdown.measure(2, 0, worker.breakdown_phases(), lambda: None)
    assert record.steps == 2 and record.bucket_bytes == [] and record.group_size == 1
    assert record.not_measured is None
    assert all(c > 0 for c in record.compute_s) and all(c < 0.01 for c in record.communication_s)


def test_layouts_it_cannot_separate_say_so():
    from types import SimpleNamespace

    from training.torch.breakdown import uncovered

    spec = worker_config(MODEL, TRAIN, {"tensor_parallel_degree": 2}).workload
    assert uncovered(spec, SimpleNamespace(pipeline=None, dp_size=1)) == "not measured for tensor parallel"
    spec = worker_config(MODEL, TRAIN, {"sharding": "stage2"}).workload
    assert uncovered(spec, SimpleNamespace(pipeline=None, dp_size=2)) == "not measured for sharding stage2"
    assert uncovered(worker_config(MODEL, TRAIN).workload, SimpleNamespace(pipeline=None, dp_size=2)) is None


def test_gradient_buckets_follow_ddps_sizes_in_reverse_parameter_order():
    import torch

    from training.torch.breakdown import buckets

    params = [torch.nn.Parameter(torch.zeros(n)) for n in (10, 20, 30, 40)]
    for p in params:
        p.grad = torch.zeros_like(p)
    got = buckets(params, [160, 400])  # 40 fp32 = 160 bytes closes the first; the rest stays under 400
    assert [[g.numel() for g in b] for b in got] == [[40], [30, 20, 10]]
    assert [[g.numel() for g in b] for b in buckets(params, [80])] == [[40], [30], [20], [10]]

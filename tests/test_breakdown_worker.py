"""The measured time breakdown on real torch ranks (gloo on the CPU): injected costs land where they belong.

One spawn of two ranks (tests/torch_pairs.py's, shared with the other modules that look inside workers on two
ranks) measures, worker after worker on the same process group, plain DDP, DDP with every debug delay set, and
ZeRO-1 and ZeRO-2 plain and with a collective delay, so the tests pay for no start of torch of their own.
"""
from __future__ import annotations

import pytest

from .torch_ranks import open_worker, worker_config

MODEL = dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16)
TRAIN = dict(micro_batch_size=2, steps=2, warmup_steps=1)
WARM = dict(micro_batch_size=2, steps=7, warmup_steps=5)  # 2 plain warm-up steps, then the 3 breakdown steps
# Delays well above what a loaded machine adds to a step of this tiny model (the suite runs in three lanes
# on 2 cores); each comparison takes the fastest of the steps: load only ever adds time, a delay adds its own.
COLLECTIVE_MS, DATA_MS, COMPUTE_MS = 250.0, 100.0, 400.0
SHARDED_MS = 250.0  # per collective


def _measure(rank: int, world: int, cfg) -> dict:
    from training import breakdown

    worker = open_worker(rank, world, cfg)
    record = breakdown.measure(3, rank, worker.breakdown_phases(), lambda: None)
    return {"record": record, "worker": worker}


def _through_harness(rank: int, world: int, cfg) -> dict:
    """The whole timed loop (training/train_task.py's ``TrainTask.records``) of ``cfg``: every record it wrote,
    in order."""
    import contextlib
    import io

    from training import train_task
    from training.contract import perflog
    from training.contract.names import Ranks

    worker, out = open_worker(rank, world, cfg), io.StringIO()
    task = train_task.TrainTask(cfg, Ranks(rank=rank, world_size=world, local_rank=rank, node_rank=0), worker)
    with contextlib.redirect_stdout(out):
        for record in task.records():
            perflog.emit(record)
    return {"record": [r for r in map(perflog.parse_line, out.getvalue().splitlines()) if r], "worker": worker}


def _in_turn(rank: int, world: int, configs: list) -> list:
    """Each config's worker in turn on the one process group (tests/torch_pairs.py's), closed in reverse; a
    config in ``HARNESS`` form, ``("harness", cfg)``, runs the whole timed loop."""
    done = [_through_harness(rank, world, cfg[1]) if isinstance(cfg, tuple) else _measure(rank, world, cfg)
            for cfg in configs]
    for one in reversed(done):
        one["worker"].close()
    return [one["record"] for one in done]


def _delayed(cfg, **debug):
    return cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"debug": cfg.workload.debug.
                          model_copy(update=debug)})})


def _configs() -> dict:
    """Plain DDP, DDP with every delay, then ZeRO-1 and ZeRO-2 (FSDP2) plain and with a collective delay."""
    plain = worker_config(MODEL, TRAIN)
    configs = {"ddp": plain, "ddp_delayed": _delayed(plain, collective_delay_ms=COLLECTIVE_MS,
                                                     data_fetch_delay_ms=DATA_MS, compute_delay_ms=COMPUTE_MS,
                                                     fail_rank=1)}
    for stage in ("stage1", "stage2"):
        cfg = worker_config(MODEL, TRAIN, {"sharding": stage})
        configs[stage], configs[f"{stage}_delayed"] = cfg, _delayed(cfg, collective_delay_ms=SHARDED_MS)
    # the whole timed loop: DDP with a warm-up long enough for its breakdown steps, FSDP2 with the same (its
    # hooks stay on the model: after the measured steps), DDP with a short warm-up (after them too)
    configs.update({"loop_ddp": ("harness", worker_config(MODEL, WARM)),
                    "loop_stage2": ("harness", worker_config(MODEL, WARM, {"sharding": "stage2"})),
                    "loop_short": ("harness", worker_config(MODEL, TRAIN))})
    return configs


def two_torch_ranks():
    """This module's part of tests/torch_pairs.py's shared spawn of two ranks."""
    return _in_turn, list(_configs().values())


@pytest.fixture(scope="module")
def records(torch_pairs) -> dict:
    """Per name, the two ranks' records (tests/torch_pairs.py: one spawn of two ranks for every such module)."""
    ranks = [rank["test_breakdown_worker"] for rank in torch_pairs]
    return {name: (ranks[0][i], ranks[1][i]) for i, name in enumerate(_configs())}


def b0_gradient_bytes(model: dict) -> int:
    """fp32 gradient bytes of the model's parameters (GPT2: tied embedding, learned positions)."""
    from training.contract.spec import ModelSpec
    from training.torch.model import GPT
    import torch

    with torch.device("meta"):
        net = GPT(ModelSpec(**model))
    return sum(p.numel() for p in net.parameters()) * 4


def fastest(record, phase: str) -> float:
    return min(getattr(record, phase))


def test_injected_costs_land_in_their_phase_and_name_the_slow_rank(records):
    (a0, a1), (b0, b1) = records["ddp"], records["ddp_delayed"]
    collectives = len(b0.bucket_bytes)
    assert collectives >= 1 and b0.group_size == 2 and b0.bucket_bytes == a0.bucket_bytes == b1.bucket_bytes
    assert sum(b0.bucket_bytes) == b0_gradient_bytes(MODEL)  # every gradient, once
    grew = fastest(b0, "communication_s") - fastest(a0, "communication_s")
    # rank 0 also waits for rank 1 in the all-reduce only if rank 1 is late into it: it is not (compute is
    # timed apart), so its communication grows by the delay alone
    assert abs(grew - collectives * COLLECTIVE_MS / 1000) <= 0.2 * collectives * COLLECTIVE_MS / 1000
    # compute does not take the collective delay (a shared machine may add noise, never half the delay)
    assert fastest(b0, "compute_s") - fastest(a0, "compute_s") < 0.5 * COLLECTIVE_MS / 1000
    assert fastest(b0, "data_s") >= DATA_MS / 1000  # a data-fetch delay lands in data
    assert fastest(b0, "data_s") - fastest(a0, "data_s") >= 0.8 * DATA_MS / 1000
    assert fastest(b1, "compute_s") >= COMPUTE_MS / 1000  # the slow rank's own compute holds its delay
    from run_benchmarks.results.breakdown.step import measured

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
    assert all(c > 0 for c in record.compute_s) and min(record.communication_s) < 0.01  # the fastest: load only adds


def test_layouts_it_cannot_separate_say_so():
    from types import SimpleNamespace

    from training.torch.breakdown import uncovered

    spec = worker_config(MODEL, TRAIN, {"tensor_parallel_degree": 2}).workload
    assert uncovered(spec, SimpleNamespace(pipeline=None, dp_size=1)) is None  # measured (tests/test_breakdown_tp.py)
    for stage in ("stage1", "stage2", "stage3"):  # measured now (test_sharded_collectives_are_timed_one_by_one)
        spec = worker_config(MODEL, TRAIN, {"sharding": stage}).workload
        assert uncovered(spec, SimpleNamespace(pipeline=None, dp_size=2)) is None
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


@pytest.mark.parametrize("stage", ["stage1", "stage2"])
def test_sharded_collectives_are_timed_one_by_one(records, stage):
    """ZeRO-1: DDP's all-reduces and the optimizer's parameter broadcast; ZeRO-2: FSDP2's all-gathers and
    reduce-scatters inside forward and backward. A delay per collective grows communication by C x D, not
    compute."""
    (plain, _), (delayed, _) = records[stage], records[f"{stage}_delayed"]
    assert plain.not_measured is None and plain.group_size == 2
    ops = plain.collective_ops
    assert ops == delayed.collective_ops and len(ops) == len(plain.bucket_bytes)
    params = b0_gradient_bytes(MODEL)
    if stage == "stage1":
        assert set(ops) == {"allreduce", "broadcast"} and ops.count("broadcast") == 1
        assert sum(b for op, b in zip(ops, plain.bucket_bytes) if op == "allreduce") == params
        assert plain.bucket_bytes[ops.index("broadcast")] == params  # every parameter, from its owner
    else:
        assert set(ops) == {"allgather", "reducescatter"}
        # every parameter gathered (at least) once and every gradient scattered once, padded to whole shards
        scattered = sum(b for op, b in zip(ops, plain.bucket_bytes) if op == "reducescatter")
        assert params <= scattered <= params + 4 * 2 * len(ops)
    # the fastest of the steps: a loaded machine only ever adds time (compute of this tiny model ran 0.2 to 2 s
    # per step with 8 jobs on 2 cores), a delay adds exactly its own
    delay = len(ops) * SHARDED_MS / 1000
    grew = min(delayed.communication_s) - min(plain.communication_s)
    assert abs(grew - delay) <= 0.2 * delay, (ops, plain.communication_s, delayed.communication_s)
    assert min(delayed.compute_s) - min(plain.compute_s) < 0.5 * delay, (plain.compute_s, delayed.compute_s)


def test_the_breakdown_steps_are_the_last_warm_up_steps_where_the_layout_leaves_the_model_alone(records):
    """DDP with 5 warm-up steps: steps 2-4 of the timed loop are the breakdown steps (each a step record, its
    time spanning the breakdown step's), so the run has no extra step; FSDP2 (its timing hooks would stay on
    the model) and a short warm-up keep them after the measured steps."""
    from training import breakdown
    from training.contract import perflog

    for rank_records in records["loop_ddp"]:
        steps = [r for r in rank_records if isinstance(r, perflog.StepRecord)]
        (timed,) = [r for r in rank_records if isinstance(r, perflog.BreakdownRecord)]
        assert [s.step for s in steps] == list(range(7)) and [s.warmup for s in steps] == [True] * 5 + [False] * 2
        assert rank_records.index(timed) == len(rank_records) - 1  # after the steps (the end record is the harness's)
        assert timed.steps == 3 and timed.method == breakdown.method(breakdown.WARMUP) and timed.not_measured is None
        assert sum(timed.bucket_bytes) == b0_gradient_bytes(MODEL) and timed.group_size == 2
        for step, seconds in zip(steps[2:5], timed.step_s):
            assert step.step_time_s >= seconds > 0 and step.loss > 0  # the loop timed the breakdown step whole
    for name in ("loop_stage2", "loop_short"):
        for rank_records in records[name]:
            (timed,) = [r for r in rank_records if isinstance(r, perflog.BreakdownRecord)]
            assert timed.steps == 3 and timed.method == breakdown.method(breakdown.AFTER), name
    assert breakdown.in_warmup(SimpleTrain(5, 3), True) == range(2, 5)
    assert breakdown.in_warmup(SimpleTrain(4, 3), True) == range(0) == breakdown.in_warmup(SimpleTrain(5, 3), False)
    assert breakdown.in_warmup(SimpleTrain(5, 0), True) == range(0)


def test_one_process_takes_its_breakdown_from_the_warm_up_too():
    from training import breakdown
    from training.contract import perflog

    done = _through_harness(0, 1, worker_config(MODEL, WARM))
    (timed,) = [r for r in done["record"] if isinstance(r, perflog.BreakdownRecord)]
    steps = [r for r in done["record"] if isinstance(r, perflog.StepRecord)]
    assert timed.method == breakdown.method(breakdown.WARMUP) and timed.steps == 3 and timed.bucket_bytes == []
    assert len(steps) == 7 and all(s.step_time_s >= t for s, t in zip(steps[2:5], timed.step_s))
    done["worker"].close()


def SimpleTrain(warmup_steps: int, breakdown_steps: int):
    from types import SimpleNamespace

    return SimpleNamespace(warmup_steps=warmup_steps, breakdown_steps=breakdown_steps)

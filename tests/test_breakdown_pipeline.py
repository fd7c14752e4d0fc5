"""The measured time breakdown of pipeline parallelism on real torch ranks (gloo on the CPU): a slow stage's
delay lands in its own compute and in its neighbour's waiting, the phases add up to the serialised step, and the
P2P sends are what the schedule's formula says.

One spawn of two ranks (tests/torch_pairs.py's, shared) holds four workers on the same process group, 1F1B
plain and with a compute delay on the last stage, GPipe, and the interleaved schedule (two stages per rank), so
the tests pay for no start of torch of their own. Each worker first runs one ordinary step (the schedule infers
its shapes there), as the harness's measured steps do before the breakdown steps.
"""
from __future__ import annotations

import statistics

import pytest

from .torch_ranks import open_worker, worker_config

MODEL = dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16)
MICRO, MICRO_BATCHES = 2, 4
TRAIN = dict(micro_batch_size=MICRO, gradient_accumulation_steps=MICRO_BATCHES, steps=2, warmup_steps=1)
STEPS = 5
# Well above what a loaded machine adds to a step of this tiny model (the suite runs in three lanes on 2 cores;
# a step computes in ~10 ms with one thread per rank, 20 to 700 ms with two threads per rank and other load).
# The configurations' breakdown steps alternate (one step of each in turn), so a burst of load, which lasts
# seconds here, falls on the plain and the delayed step of a pair alike; a comparison takes the median over the
# pairs of their difference.
COMPUTE_MS = 400.0
# What the compute phase does outside the schedule and its chunks (joining the micro-batches, the tied gradients'
# local sum, the loss scaler's bookkeeping) is in no phase: the phases add up to the serialised step within this.
UNACCOUNTED_S = 0.010


def _merged(records: list):
    """One record of the single-step records of one configuration."""
    from dataclasses import replace

    per_step = (*records[0].PER_STEP, "pipeline_wait_s")
    return replace(records[-1], steps=len(records), **{name: [v for r in records for v in getattr(r, name)]
                                                       for name in per_step})


def _in_turn(rank: int, world: int, configs: list) -> list:
    """Every config's worker on the one process group (tests/torch_pairs.py's), each after one
    ordinary step (the schedule infers the shapes between the stages there); then their breakdown steps in turn,
    one step of each per round. One thread per rank, as torchrun starts them: two ranks on 2 cores."""
    import torch

    from training import breakdown

    torch.set_num_threads(1)
    workers = [open_worker(rank, world, cfg) for cfg in configs]
    for worker in workers:
        worker.after_step(worker.train_step())
    phases = [worker.breakdown_phases() for worker in workers]
    steps = [[breakdown.measure(1, rank, p, lambda: None) for p in phases] for _ in range(STEPS)]
    for worker in reversed(workers):
        worker.close()
    return [_merged([round_[i] for round_ in steps]) for i in range(len(configs))]


def _pipeline(schedule: str, model: dict = MODEL, **debug):
    cfg = worker_config(model, TRAIN, {"pipeline_parallel_degree": 2, "pipeline_schedule": schedule})
    return cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"debug": cfg.workload.debug.
                          model_copy(update=debug)})})


def _configs() -> dict:
    return {"1f1b": _pipeline("1f1b"), "1f1b_delayed": _pipeline("1f1b", compute_delay_ms=COMPUTE_MS, fail_rank=1),
            "gpipe": _pipeline("gpipe"), "interleaved": _pipeline("interleaved", {**MODEL, "n_layer": 4})}


def two_torch_ranks():
    """This module's part of tests/torch_pairs.py's shared spawn of two ranks."""
    return _in_turn, list(_configs().values())


@pytest.fixture(scope="module")
def records(torch_pairs) -> dict:
    """Per name, the two ranks' records (tests/torch_pairs.py: one spawn for every such module)."""
    ranks = [rank["test_breakdown_pipeline"] for rank in torch_pairs]
    return {name: (ranks[0][i], ranks[1][i]) for i, name in enumerate(_configs())}


def paired(a, b, phase: str) -> float:
    """The median over the alternating steps of b's phase less a's."""
    return statistics.median(y - x for x, y in zip(getattr(a, phase), getattr(b, phase)))


def test_a_slow_stage_is_its_own_compute_and_its_neighbours_wait(records):
    """A compute delay on the last stage (rank 1) lands in its compute and names it the pipeline's slowest stage;
    the first stage, waiting for its gradients, waits about as much longer; its own compute does not grow, nor
    does the slow stage's waiting."""
    from run_benchmarks.results.breakdown.step import measured

    (a0, a1), (b0, b1) = records["1f1b"], records["1f1b_delayed"]
    delay = COMPUTE_MS / 1000
    assert all(c >= delay for c in b1.compute_s), b1.compute_s  # the sleep is inside what is timed as compute
    assert abs(paired(a1, b1, "compute_s") - delay) <= 0.25 * delay, (a1.compute_s, b1.compute_s)
    assert abs(paired(a0, b0, "pipeline_wait_s") - delay) <= 0.25 * delay, (a0.pipeline_wait_s, b0.pipeline_wait_s)
    assert abs(paired(a0, b0, "compute_s")) < 0.25 * delay, (a0.compute_s, b0.compute_s)
    assert abs(paired(a1, b1, "pipeline_wait_s")) < 0.25 * delay, (a1.pipeline_wait_s, b1.pipeline_wait_s)
    part = measured([b0, b1], None)
    assert part["straggler"]["rank"] == 1 and part["straggler"]["stages"] == [1]
    assert measured([a0, a1], None)["per_rank"][1]["compute_s"] < delay  # not without the delay


@pytest.mark.parametrize("name", ["1f1b", "1f1b_delayed", "gpipe", "interleaved"])
def test_the_phases_add_up_to_the_serialised_step(records, name):
    for record in records[name]:
        assert record.not_measured is None and record.steps == STEPS
        assert record.pipeline["schedule"] == name.removesuffix("_delayed")
        left = [step - data - compute - wait - comm - pipe - opt for step, data, compute, wait, comm, pipe, opt in zip(
            record.step_s, record.data_s, record.compute_s, record.wait_s, record.communication_s,
            record.pipeline_wait_s, record.optimizer_s)]
        assert min(left) >= -1e-6, left  # no time counted twice
        assert min(left) <= UNACCOUNTED_S, left  # and next to nothing counted nowhere


@pytest.mark.parametrize("name, sends", [("1f1b", MICRO_BATCHES), ("gpipe", MICRO_BATCHES),
                                         ("interleaved", 3 * MICRO_BATCHES)])
def test_each_send_is_one_micro_batchs_activations_and_the_tied_embedding_is_all_reduced(records, name, sends):
    """Per stage boundary and micro-batch one activation forward and one gradient backward, each micro_batch x
    seq_len x d_model fp32 values; the interleaved schedule's rank 0 holds stages 0 and 2 (3 boundaries' sends),
    rank 1 stages 1 and 3. The embedding tied between the first and the last stage: one all-reduce of it."""
    activation = MICRO * MODEL["seq_len"] * MODEL["d_model"] * 4
    for rank, record in enumerate(records[name]):
        facts = record.pipeline
        assert facts["sends"] == sends and facts["send_bytes"] == sends * activation
        assert facts["micro_batches"] == MICRO_BATCHES and facts["ranks"] == 2
        assert facts["stage_ids"] == ([rank, rank + 2] if name == "interleaved" else [rank])
        assert record.collective_ops == ["allreduce"] and record.group_size == 2
        assert record.bucket_bytes == [MODEL["vocab_size"] * MODEL["d_model"] * 4]
    stages = records[name][0].pipeline["stages"]
    assert sum(r.pipeline["sends"] for r in records[name]) == 2 * MICRO_BATCHES * (stages - 1)  # the stated count

"""Tensor parallel's time breakdown on real torch ranks (gloo on the CPU): DTensor's collectives timed one by
one (training/torch/breakdown_tp.py), the debug delay landing on each of them, the recorded collectives
against the count run_benchmarks/results/breakdown/layouts.py works out from the shapes.

One spawn of two ranks (tests/torch_pairs.py's, shared with the other modules that look inside workers on two
ranks) measures, worker after worker on the same process group, TP2 plain, TP2 with a collective delay, TP2
with sequence parallelism and TP2 compiled. FSDP2 on the data-parallel mesh dimension beside TP2, with a
delay, is measured in the four-rank launch tests/test_parity.py already makes for that layout's parity
(``test_fsdp_beside_tensor_parallel_times_both_with_their_own_groups`` there; a spawn of four ranks of its own
here cost ~21 s of CPU).
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Optional

import pytest

from .torch_ranks import open_worker, worker_config

pytestmark = pytest.mark.e2e

MODEL = dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16)  # gelu: 4 column-parallel projections
TRAIN = dict(micro_batch_size=2, steps=2, warmup_steps=1)

DELAY_MS = 200.0  # per collective: 12 per step here, far above what a loaded machine adds to this tiny model
TP = {"tensor_parallel_degree": 2}


def _callers(worker) -> set:
    """The files whose code called each tensor-parallel collective of one forward+backward under the
    breakdown's interception: funcol's Python for eager DTensor, inductor's generated code for compiled blocks
    (which shows they ran compiled, not eagerly)."""
    import sys

    from training.torch import breakdown_tp

    callers = set()

    def around(op, nbytes, ranks, group, issue):
        frame = sys._getframe(1)
        while frame.f_code.co_filename == breakdown_tp.__file__:
            frame = frame.f_back
        callers.add(frame.f_code.co_filename)
        return issue()

    with breakdown_tp.intercepted(around):
        worker.parallel.forward_backward(worker.fetch(), 1.0, worker.precision, worker.scaler, worker.torch_device)
    worker.parallel.optimizer.zero_grad(set_to_none=True)
    return callers


def _missed(worker) -> Optional[str]:
    """A collective on the tensor-parallel group issued past the functional API, inside a timed phase: the
    sequence-number check makes the breakdown say so."""
    import torch
    import torch.distributed as dist

    from training.breakdown import Collectives
    from training.torch import breakdown_tp

    group = breakdown_tp.tensor_parallel_group(worker.parallel.model)
    inner = Collectives(lambda: None, dist.barrier)
    breakdown_tp.timed(inner, group)(lambda: dist.all_reduce(torch.ones(1), group=group))()
    return inner.unmeasured


def _measure(rank: int, world: int, configs: list) -> list:
    """Per config: ``warm`` measured steps (timed: the measured steps' delay), then 3 breakdown steps; each
    config's worker in turn on the one process group (tests/torch_pairs.py's)."""
    from training import breakdown
    from training.torch.compiles import compiled_graphs

    done, workers = [], []
    for cfg, warm in configs:
        worker = open_worker(rank, world, cfg)
        workers.append(worker)
        step_s = []
        for _ in range(warm):
            began = time.perf_counter()
            work = worker.train_step()
            step_s.append(time.perf_counter() - began)
            worker.after_step(work)
        graphs = compiled_graphs()
        record = breakdown.measure(3, rank, worker.breakdown_phases(), lambda: None)
        done.append({"record": record, "step_s": step_s, "graphs_built": compiled_graphs() - graphs,
                     "callers": _callers(worker)})
    done.append(_missed(workers[0]))
    for worker in reversed(workers):
        worker.close()
    return done


def _configs() -> dict:
    plain = worker_config(MODEL, TRAIN, TP)
    return {"tp": (plain, 2), "tp_delayed": (_delayed(plain, collective_delay_ms=DELAY_MS), 2),
            "sp": (worker_config(MODEL, TRAIN, {**TP, "sequence_parallel": True}), 0),
            "compiled": (worker_config(MODEL, {**TRAIN, "compile": "default"}, TP), 1)}


def two_torch_ranks():
    """This module's part of tests/torch_pairs.py's shared spawn of two ranks."""
    return _measure, list(_configs().values())


@pytest.fixture(scope="module")
def tp_records(torch_pairs) -> dict:
    """Per name, the two ranks' results (tests/torch_pairs.py: one spawn for every such module)."""
    ranks = [rank["test_breakdown_tp"] for rank in torch_pairs]
    return {name: (ranks[0][i], ranks[1][i]) for i, name in enumerate([*_configs(), "missed"])}


def _delayed(cfg, **debug):
    return cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"debug": cfg.workload.debug.
                          model_copy(update=debug)})})


def _workload(parallel: dict):
    return worker_config(MODEL, TRAIN, parallel).workload


def activation_bytes() -> int:
    return TRAIN["micro_batch_size"] * MODEL["seq_len"] * MODEL["d_model"] * 4  # fp32


def test_each_tensor_parallel_collective_is_timed_and_takes_the_delay(tp_records):
    (a0, a1), (b0, b1) = tp_records["tp"], tp_records["tp_delayed"]
    plain, delayed = a0["record"], b0["record"]
    assert plain.not_measured is None and delayed.not_measured is None
    ops = plain.collective_ops
    assert ops == delayed.collective_ops == a1["record"].collective_ops == b1["record"].collective_ops
    assert set(plain.group_sizes) == {2}
    assert plain.group_size == 1  # no data parallelism: each collective's own group is tensor parallel's
    c, d = len(ops), DELAY_MS / 1000
    # the fastest of the steps: a loaded machine only ever adds time, the delay adds exactly its own
    grew = min(delayed.communication_s) - min(plain.communication_s)
    assert abs(grew - c * d) <= 0.2 * c * d, (ops, plain.communication_s, delayed.communication_s)
    assert min(delayed.compute_s) - min(plain.compute_s) < 0.5 * c * d, (plain.compute_s, delayed.compute_s)
    # and in the measured steps, through the same interception: every collective of a step sleeps first
    assert min(b0["step_s"]) >= c * d and min(b0["step_s"]) - min(a0["step_s"]) >= 0.5 * c * d, (
        a0["step_s"], b0["step_s"])


def test_recorded_collectives_are_what_breakdown_layouts_works_out(tp_records):
    """Tensor parallel alone: exactly the by-construction count and sizes. Sequence parallel: the same 8 per
    block, plus the extras the layouts' docstring names: 2 all-gathers per micro-batch and the optimizer
    step's all-reduces of the norms' Partial gradients."""
    from run_benchmarks.results.breakdown import layouts as breakdown_layouts

    record = tp_records["tp"][0]["record"]
    predicted, tp, _ = breakdown_layouts.tensor_parallel(_workload(TP), 2)
    assert tp == 2 and list(zip(record.collective_ops, record.bucket_bytes)) == predicted
    assert len(predicted) == 6 * MODEL["n_layer"]  # 2 forward + q, k, v, fc backward: not Megatron's 4

    sp = tp_records["sp"][0]["record"]
    assert sp.not_measured is None and sp.group_sizes == [2] * len(sp.bucket_bytes)
    predicted, _, _ = breakdown_layouts.tensor_parallel(_workload({**TP, "sequence_parallel": True}), 2)
    extra = Counter(zip(sp.collective_ops, sp.bucket_bytes)) - Counter(predicted)
    assert Counter(predicted) - Counter(zip(sp.collective_ops, sp.bucket_bytes)) == Counter()  # all predicted ran
    norms = 2 * MODEL["n_layer"] * 2  # ln_1 and ln_2, weight and bias, in each block
    assert extra[("allgather", activation_bytes())] == 2 * TRAIN.get("gradient_accumulation_steps", 1)
    assert extra[("allreduce", MODEL["d_model"] * 4)] % norms == 0 and extra[("allreduce", MODEL["d_model"] * 4)]
    assert set(extra) == {("allgather", activation_bytes()), ("allreduce", MODEL["d_model"] * 4)}


def test_compiled_blocks_run_compiled_and_their_collectives_are_timed(tp_records):
    eager, compiled = tp_records["tp"][0], tp_records["compiled"][0]
    assert compiled["record"].not_measured is None and compiled["graphs_built"] == 0  # no recompile either
    assert compiled["record"].collective_ops == eager["record"].collective_ops
    assert compiled["record"].bucket_bytes == eager["record"].bucket_bytes
    assert {path.rsplit("/", 1)[-1] for path in eager["callers"]} == {"_functional_collectives.py"}
    # inductor's generated wrappers issued every one: the blocks ran compiled under the interception
    assert compiled["callers"] and not any("torch/distributed" in path for path in compiled["callers"]), compiled


def test_a_collective_past_the_interception_makes_the_breakdown_say_not_measured(tp_records):
    for why in tp_records["missed"]:
        assert why.startswith("not measured for tensor parallel: 1 collective(s) ran on the tensor-parallel group "
                              "past the functional collectives"), why

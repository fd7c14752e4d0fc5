"""Fleet's own collectives in the measured time breakdown, on real Paddle ranks (``paddle.distributed.launch``,
gloo on the CPU): each one timed through the process group's methods (training/paddle/breakdown_collectives.py).

One launch of two ranks (TP2, one fleet layout: tests/paddle_pairs.py's, shared with tests/test_paddle.py's
parity runs of TP2) runs tensor parallel plain, with a collective delay, and with sequence parallelism; one
launch of four ranks runs sharding stage1 over 2 ranks with a data-parallel degree 2 beside it, plain and with a collective delay (tests/parity_launch.py: each launch runs its configs in turn).
A delay of D ms grows each rank's communication by C x D (C: the collectives it recorded per step) within 20 %
and not its compute, comparing the fastest steps (load only ever adds time). The recorded collectives are
what Paddle 3.3.1 issues (read in its source): for TP, run_benchmarks/results/breakdown/layouts.py's count
for Paddle plus the broadcasts it leaves out; for sharding x dp, each reduce and broadcast over the sharding
group (2 ranks) and the data-parallel group's all-reduce of this rank's own gradients (2 ranks)."""
from __future__ import annotations

from collections import Counter

import pytest

from training.contract import perflog

from .parity_launch import Run, launch
from .test_paddle_breakdown_launch import _breakdowns, _model
from .test_parity import ONE_THREAD

pytestmark = pytest.mark.e2e

COMMON = ("train.steps=2", "train.warmup_steps=1", "train.micro_batch_size=2", "train.breakdown_steps=3")
TP = ("parallel.tensor_parallel_degree=2",)
TP_MS = 80.0  # per collective: 34 per step here (2.7 s), far above what a loaded machine adds to this tiny model
SHARDED = ("parallel.sharding=stage1", "parallel.sharding_parallel_degree=2")
SHARDED_MS = 40.0  # 73 collectives per step (2.9 s)


def two_rank_runs(_inputs) -> list[Run]:
    """TP2 plain, delayed and sequence parallel, for tests/paddle_pairs.py's shared launches."""
    return [Run("tp", "gpt3_tiny:paddle:cpu:1:2", (*COMMON, *TP)),
            Run("tp_delayed", "gpt3_tiny:paddle:cpu:1:2", (*COMMON, *TP, f"debug.collective_delay_ms={TP_MS}")),
            Run("tp_sp", "gpt3_tiny:paddle:cpu:1:2", (*COMMON, *TP, "parallel.sequence_parallel=true"))]


@pytest.fixture(scope="module")
def tensor_parallel(paddle_pairs) -> dict:
    labels, run = ("tp", "tp_delayed", "tp_sp"), paddle_pairs.launch
    assert set(labels) <= run.finished, run.errors
    return {label: _breakdowns(run, label) for label in labels} | {"plans": run.plans}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> dict:
    labels = ("sdp", "sdp_delayed")
    run = launch(tmp_path_factory.mktemp("paddle_sdp_breakdown"),
                 [Run("sdp", "gpt3_tiny:paddle:cpu:1:4", SHARDED),
                  Run("sdp_delayed", "gpt3_tiny:paddle:cpu:1:4",
                      (*SHARDED, f"debug.collective_delay_ms={SHARDED_MS}"))],
                 COMMON, env=ONE_THREAD)
    assert set(labels) <= run.finished, run.errors
    return {label: _breakdowns(run, label) for label in labels}


def _delay_lands_in_communication(plain: list, delayed: list, delay_ms: float, world: int) -> None:
    assert len(plain) == len(delayed) == world  # one record per rank
    for a, b in zip(plain, delayed):
        assert a.not_measured is None and b.not_measured is None and a.steps == b.steps == 3
        assert b.collective_ops == a.collective_ops and b.bucket_bytes == a.bucket_bytes
        delay = len(b.bucket_bytes) * delay_ms / 1000
        grew = min(b.communication_s) - min(a.communication_s)
        assert abs(grew - delay) <= 0.2 * delay, (b.rank, len(b.bucket_bytes), a.communication_s, b.communication_s)
        # the delay is moved out of the phases it ran in: never compute, never the optimizer (the whole C x D
        # would land there; half of it bounds them: beside CI's lanes one run's fastest compute step was up to
        # 0.32 s above the run's before it, a tenth of the delay)
        assert min(b.compute_s) - min(a.compute_s) < 0.5 * delay, (b.rank, a.compute_s, b.compute_s)
        assert min(b.optimizer_s) - min(a.optimizer_s) < 0.5 * delay, (b.rank, a.optimizer_s, b.optimizer_s)


def _sync_param_bytes(model) -> list[int]:
    """What ``HybridParallelOptimizer`` broadcasts after each step under TP (``mp_configs.sync_param``): each
    replicated parameter named ``embedding*`` (the learned positions), ``layer_norm*`` or ``*.b_*`` (the row-
    parallel projections' biases: column-parallel ones are split), fp32."""
    norms = [model.d_model * 4] * 2 * (2 * model.n_layer + 1)  # ln_1, ln_2 per block, ln_f: weight and bias
    return [model.seq_len * model.d_model * 4] + norms + [model.d_model * 4] * 2 * model.n_layer


def test_paddle_tensor_parallel_times_each_collective_and_the_delay_lands_in_communication(tensor_parallel):
    _delay_lands_in_communication(tensor_parallel["tp"], tensor_parallel["tp_delayed"], TP_MS, 2)


@pytest.mark.parametrize("label", ["tp", "tp_sp"])
def test_paddle_tensor_parallels_recorded_collectives_are_the_paddle_count_plus_fleets_broadcasts(
        tensor_parallel, label):
    """Recorded per step = breakdown_layouts' count for Paddle (the blocks' 6 per micro-batch, or 8 under
    sequence parallelism, the embedding's, the head's and the loss's) + what it leaves out: the token ids and
    targets broadcast each micro-batch (cpu_compat's broadcast_input_data: one per tensor, int64), the
    replicated parameters broadcast after the optimizer step, and under sequence parallelism the norms' and row
    biases' gradient all-reduces. Every one over the TP group of 2; both ranks alike."""
    from run_benchmarks.results.breakdown import layouts as breakdown_layouts

    model, plan = _model(), tensor_parallel["plans"][label]
    counted, tp, _ = breakdown_layouts.tensor_parallel(plan.workload, 2, "paddle")
    micro = plan.workload.train.micro_batch_size * model.seq_len
    left_out = [("broadcast", micro * 8)] * 2 + [("broadcast", b) for b in _sync_param_bytes(model)]
    if label == "tp_sp":  # every parameter marked sequence-parallel: the norms and the row-parallel biases
        left_out += [("allreduce", model.d_model * 4)] * (2 * (2 * model.n_layer + 1) + 2 * model.n_layer)
    records = tensor_parallel[label]
    assert len(records) == 2
    for record in records:
        assert record.not_measured is None and record.group_sizes == [tp] * len(record.bucket_bytes)
        assert Counter(zip(record.collective_ops, record.bucket_bytes)) == Counter(counted + left_out), label
        assert record.collective_ops == records[0].collective_ops and record.bucket_bytes == records[0].bucket_bytes


def test_paddle_sharding_beside_data_parallel_records_each_collective_with_its_groups_size(sharded):
    """Per step on every rank: one reduce per trainable parameter (its gradient, to its owner) over the
    sharding group of 2, one all-reduce of this rank's own parameters' gradients over the data-parallel group of
    2 (fleet's fused_allreduce_gradients: under 128 MB, one bucket), one broadcast per parameter from its owner
    over the sharding group; the two sharding ranks' all-reduces together hold every gradient once."""
    from training.contract import flops
    from training.paddle.model import GPT, Kernels

    params = [int(p.size) * 4 for p in GPT(_model(), 1, 0, Kernels(False, False), False).parameters()]
    n, owned = len(params), {}
    assert len(sharded["sdp"]) == 4
    for record in sharded["sdp"]:
        assert record.not_measured is None
        assert record.collective_ops == ["reduce"] * n + ["allreduce"] + ["broadcast"] * n
        assert record.group_sizes == [2] * (2 * n + 1) and record.bucket_bytes[:n] == params
        assert sorted(record.bucket_bytes[n + 1:]) == sorted(params)
        owned.setdefault(record.bucket_bytes[n], []).append(record.rank)
    assert len(owned) == 2 and sum(owned) == flops.total_params(_model()) * 4, owned  # ranks of one sharding rank
    assert sorted(len(ranks) for ranks in owned.values()) == [2, 2]  # alike within their data-parallel group


def test_paddle_sharding_beside_data_parallel_delay_lands_in_communication(sharded):
    _delay_lands_in_communication(sharded["sdp"], sharded["sdp_delayed"], SHARDED_MS, 4)

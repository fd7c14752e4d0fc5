"""The figures, computed by hand on records whose answers are known."""
import math

import pytest

from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs.rank_logs import RankLog
from training.contract.perflog import EndRecord, StartRecord, StepRecord


def rank_log(rank, times, warmup=2, tokens=1000, peak=100 * 2**20, reserved=None, recompiles=None, samples=None):
    start = StartRecord(rank=rank, local_rank=rank, node_rank=0, world_size=2, framework="torch",
                        framework_version="2.13.0", device="cpu", precision="bf16", n_params=10,
                        flops_per_token=6e6, flop_formula="f", tokens_per_step=tokens, samples_per_step=samples)
    steps = [StepRecord(rank=rank, step=i, warmup=i < warmup, step_time_s=t, tokens=tokens, loss=10.0 - i)
             for i, t in enumerate(times)]
    end = EndRecord(rank=rank, steps=len(times), peak_memory_bytes=peak, memory_total_bytes=2**30, memory_kind="rss",
                    peak_memory_reserved_bytes=reserved, recompiles=recompiles)
    log = RankLog(rank, None, start, end=end)
    for record in steps:
        log.series.add_record(record)
    return log


def test_warm_up_is_excluded_and_the_slowest_rank_sets_each_step():
    # Warm-up steps are absurdly slow: if they leaked into any figure, it would show.
    r0 = rank_log(0, [100.0, 100.0, 1.0, 2.0, 1.0])
    r1 = rank_log(1, [100.0, 100.0, 2.0, 1.0, 1.0], peak=300 * 2**20)
    m = analyze.round_metrics([r0, r1], peak_tflops=None, peak_note="no peak")
    assert m.measured_steps == 3 and m.warmup_steps == 2
    assert m.step_time_s.median == 2.0 and m.step_time_s.min == 1.0 and m.step_time_s.max == 2.0
    # 2 ranks x 3 steps x 1000 tokens over (2 + 2 + 1) s
    assert m.tokens_per_s_total == pytest.approx(6000 / 5)
    assert m.tokens_per_s_per_device == pytest.approx(600)
    assert m.tokens_per_s_per_rank.min == pytest.approx(3000 / 4) and m.tokens_per_s_per_rank.max == pytest.approx(750)
    assert m.tflops_per_device == pytest.approx(6e6 * 600 / 1e12)
    assert m.mfu is None and m.mfu_note == "no peak"
    assert m.peak_memory_bytes.max == 300 * 2**20 and m.peak_memory_bytes.min == 100 * 2**20
    assert (m.loss_first, m.loss_last) == (10.0, 6.0)


def test_reserved_memory_recompiles_and_the_declared_total_are_kept():
    r0 = rank_log(0, [1.0, 1.0, 1.0, 1.0], reserved=300 * 2**20, recompiles=0)
    r1 = rank_log(1, [1.0, 1.0, 1.0, 1.0], reserved=500 * 2**20, recompiles=2)
    m = analyze.round_metrics([r0, r1], peak_tflops=None, peak_note="no peak")
    assert m.peak_memory_reserved_bytes.max == 500 * 2**20 and m.recompiles == 2
    assert (m.memory_total_bytes, m.memory_total_source) == (2**30, "worker")
    acc = analyze.RoundAccumulator()
    for rank in (rank_log(0, [1.0, 1.0, 1.0]), rank_log(1, [1.0, 1.0, 1.0])):
        acc.add(rank)
    declared = acc.metrics(None, "no peak", None, memory_total_bytes=80 * 2**30)
    assert (declared.memory_total_bytes, declared.memory_total_source) == (80 * 2**30, "declared")
    assert declared.peak_memory_reserved_bytes is None and declared.recompiles is None


def test_mfu_is_achieved_over_peak():
    r = rank_log(0, [1.0, 1.0, 0.5, 0.5], tokens=1_000_000)
    m = analyze.round_metrics([r], peak_tflops=100.0, peak_note="")
    assert m.tflops_per_device == pytest.approx(6e6 * 2e6 / 1e12)  # 12 TFLOP/s
    assert m.mfu == pytest.approx(0.12)
    assert "100 TFLOP/s (bf16 peak)" in m.mfu_note


def test_a_rank_without_an_end_record_has_no_figures():
    r = rank_log(0, [1.0, 1.0, 1.0])
    r.end = None
    with pytest.raises(analyze.NothingToMeasure):
        analyze.round_metrics([r], None, "")


def test_only_warm_up_steps_means_nothing_to_measure():
    with pytest.raises(analyze.NothingToMeasure):
        analyze.round_metrics([rank_log(0, [1.0, 1.0], warmup=2)], None, "")


def test_across_rounds_flags_variation_above_five_percent():
    steady = analyze.round_metrics([rank_log(0, [1, 1, 1.0, 1.0])], None, "")
    slower = analyze.round_metrics([rank_log(0, [1, 1, 1.2, 1.2])], None, "")
    agg = analyze.across_rounds([steady, slower, None])
    assert (agg["rounds"], agg["rounds_ok"]) == (3, 2)
    tok = agg["tokens_per_s_per_device"]
    assert tok["max"] == pytest.approx(1000) and tok["min"] == pytest.approx(1000 / 1.2)
    assert any("tokens_per_s_per_device varies" in f for f in agg["flags"])
    assert agg["mfu"] is None


def test_stats_of_one_value_has_no_spread():
    s = analyze.Stats.of([4.0])
    assert (s.mean, s.std, s.cv) == (4.0, 0.0, 0.0)
    assert math.isnan(analyze.Stats.of([0.0, 0.0]).cv)


def test_error_lines_skip_a_rank_that_only_lost_its_peer(tmp_path):
    """Two nodes' launchers each name their own rank; the crash, not its echo, explains the failure."""
    from run_benchmarks.results.worker_logs import rank_logs as collect
    from run_benchmarks.results.worker_logs.rank_logs import RankLogs

    def rank_log(rank: int, last_line: str) -> collect.RankLog:
        stderr = tmp_path / f"rank{rank}.stderr.log"
        stderr.write_text(f"Traceback (most recent call last):\n  File \"train.py\", line 1\n{last_line}\n")
        return collect.RankLog(rank, RankLogs(rank, tmp_path / f"rank{rank}.stdout.log", stderr))

    echo = rank_log(0, "RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer.")
    crash = rank_log(1, "InjectedFailure: injected failure on rank 1 at step 3")
    launcher = tmp_path / "launcher.log"
    launcher.write_text("Root Cause (first observed failure):\n  rank      : 0\n")
    lines = collect.error_lines([echo, crash], [launcher])
    assert lines[-1] == "[rank 1] InjectedFailure: injected failure on rank 1 at step 3"
    only_echo = collect.error_lines([echo], [launcher])
    assert "Connection reset by peer" in only_echo[-1]  # with nothing better, the echo is still shown


def test_per_node_throughput_samples_and_the_step_series():
    r0, r1 = rank_log(0, [9, 9, 1.0, 1.0, 2.0]), rank_log(1, [9, 9, 1.0, 1.0, 2.0], tokens=3000)
    r1.start = r1.start.__class__(**{**r1.start.__dict__, "node_rank": 1, "init_time_s": 4.5})
    m = analyze.round_metrics([r0, r1], None, "", samples_per_step=12)
    # node 0 did 3 x 1000 tokens, node 1 3 x 3000, over 4 s of (slowest-rank) steps
    assert m.tokens_per_s_per_node == [pytest.approx(750), pytest.approx(2250)]
    assert m.samples_per_s == pytest.approx(12 * 3 / 4)
    assert m.step_time_series == [[2, 1.0], [3, 1.0], [4, 2.0]]
    assert (m.first_step_time_s, m.init_time_s, m.nnodes) == (9, 4.5, 2)


def test_a_long_run_keeps_a_bounded_step_series():
    times = [1.0] * 2 + [0.5, 1.5] * 1000
    m = analyze.round_metrics([rank_log(0, times)], None, "")
    assert len(m.step_time_series) == analyze.STEP_SERIES_POINTS
    assert all(0.5 < t < 1.5 for _, t in m.step_time_series)  # bucket means of alternating 0.5 / 1.5 s
    assert m.step_time_series[0][0] == 2 and m.step_time_series[-1][0] < 2002
    assert m.step_time_s.n == 2000 and m.step_time_s.mean == pytest.approx(1.0)


def test_samples_per_step_is_what_the_workers_report_and_the_layout_only_for_older_workers():
    """Two ranks sharing one replica report half a sequence each: one sample a step, over 2 + 2 + 1 s. A worker
    from before the field reports none: the layout's global batch the caller passes is used."""
    reported = [rank_log(r, [100.0, 100.0, 2.0, 2.0, 1.0], samples=0.5) for r in (0, 1)]
    m = analyze.round_metrics(reported, peak_tflops=None, peak_note="", samples_per_step=8)
    assert m.samples_per_step == 1 and m.samples_per_s == pytest.approx(3 / 5)
    older = [rank_log(r, [100.0, 100.0, 2.0, 2.0, 1.0]) for r in (0, 1)]
    m = analyze.round_metrics(older, peak_tflops=None, peak_note="", samples_per_step=8)
    assert m.samples_per_step == 8 and m.samples_per_s == pytest.approx(8 * 3 / 5)

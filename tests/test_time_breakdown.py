"""The time breakdown's figures (run_benchmarks/results/breakdown/step.py): measured parts from breakdown records,
expected parts from the stored peaks and bus bandwidth, exactly, and what is missing said with its command."""
from __future__ import annotations

import json
import math

import pytest

from run_benchmarks.results.breakdown import step as breakdown
from run_benchmarks.results.breakdown import words
from training.contract import perflog

MEASURE = "accelbench run {op}:torch:cpu:1:2"


def record(rank: int, compute: float, comm: float = 0.01, buckets=(4_000_000, 1_000_000), group: int = 2):
    return perflog.BreakdownRecord(rank=rank, steps=3, data_s=[0.002] * 3, compute_s=[compute, compute, 9.0],
                                   wait_s=[0.0] * 3, communication_s=[comm] * 3, optimizer_s=[0.003] * 3,
                                   step_s=[compute + comm + 0.006] * 3, bucket_bytes=list(buckets), group_size=group,
                                   method="m")


def allreduce_row(hosts=("h",), ranks=2, points=((1 << 20, 2.0), (4 << 20, 4.0))) -> dict:
    figures = [{"name": "allreduce.busbw_gbps", "value": gbps, "params": {"bytes": size, "ranks": ranks}}
               for size, gbps in points]
    return {"status": "ok", "case_name": "allreduce", "run_id": "r1", "figures": figures,
            "environment": {"nodes": [{"environment": {"hostname": h}} for h in hosts]}}


def test_measured_parts_and_the_slow_rank_named():
    part = breakdown.measured([record(0, 0.1), record(1, 0.3)], step_time_s=0.35)
    assert part["compute_s"] == 0.3  # the slowest rank's median: everyone waits for it
    assert part["communication_s"] == 0.01
    assert part["other_s"] == pytest.approx(0.006)  # data + optimizer of the slowest rank's serialised step
    assert part["straggler"]["rank"] == 1 and part["straggler"]["median_compute_s"] == pytest.approx(0.2)
    assert [r["rank"] for r in part["per_rank"]] == [0, 1] and part["per_rank"][0]["compute_s"] == 0.1
    assert part["collectives"] == 2 and part["gradient_bytes"] == 5_000_000
    even = breakdown.measured([record(0, 0.1), record(1, 0.105)], step_time_s=0.12)
    assert even["straggler"] is None  # within the 10 % margin


def test_not_measured_says_why():
    skipped = perflog.BreakdownRecord(rank=1, steps=0, not_measured="not measured for tensor parallel")
    assert breakdown.measured([record(0, 0.1), skipped], 0.2) == {"not_measured": "not measured for tensor parallel"}


def test_expected_compute_and_communication_are_the_stated_formulas_exactly():
    points = breakdown.busbw_points([allreduce_row()], frozenset({"h"}), 2)
    out = breakdown.expected(6e12, (50.0, "calibrated"), (100.0, "datasheet"), [4 << 20, 1 << 20], 2, points, MEASURE)
    assert out["compute_s"] == 6e12 / (50.0 * 1e12) and out["compute_s_datasheet"] == 6e12 / (100.0 * 1e12)
    # each bucket at the busbw measured at its own size: bytes x 2(n-1)/n / busbw
    assert out["communication_s"] == math.fsum([(4 << 20) * 2 * 1 / 2 / 4e9, (1 << 20) * 2 * 1 / 2 / 2e9])
    assert out["missing"] == []


def test_missing_figures_are_named_with_the_command_nothing_invented():
    out = breakdown.expected(6e12, (None, "no measured bf16 peak for cpu: run `accelbench calibrate cpu`"),
                             (None, ""), [1 << 20], 2, [], MEASURE)
    assert out["compute_s"] is None and out["communication_s"] is None
    assert out["missing"] == ["no measured bf16 peak for cpu: run `accelbench calibrate cpu`",
                              f"no all-reduce busbw stored for 2 ranks on these hosts: run `{MEASURE.replace('{op}', 'allreduce')}`"]


def test_busbw_only_from_the_same_hosts_and_group_size():
    rows = [allreduce_row(hosts=("other",)), allreduce_row(ranks=4)]
    assert breakdown.busbw_points(rows, frozenset({"h"}), 2) == []
    assert breakdown.nearest(breakdown.busbw_points([allreduce_row()], frozenset({"h"}), 2), 3 << 20).nbytes == 4 << 20


def test_busbw_of_the_rounds_own_framework_first_else_any():
    """Paddle's gloo collectives and torch's differ severalfold on one CPU: a Paddle round is priced by Paddle's
    stored micro case where there is one, else by the newest of any framework's, named as its source."""
    paddle = {**allreduce_row(points=((1 << 20, 9.0),)), "framework": "paddle", "case_name": "allreduce:paddle:cpu:1:2"}
    torch = {**allreduce_row(points=((1 << 20, 3.0),)), "framework": "torch", "case_name": "allreduce:torch:cpu:1:2"}
    rows, hosts = [paddle, torch], frozenset({"h"})  # torch's is the newer
    assert [p.gbps for p in breakdown.busbw_points(rows, hosts, 2, framework="paddle")] == [9.0]
    assert [p.gbps for p in breakdown.busbw_points(rows, hosts, 2, framework="torch")] == [3.0]
    (other,) = breakdown.busbw_points(rows, hosts, 2, framework="mindspore")
    assert other.gbps == 3.0 and other.source.startswith("allreduce:torch:cpu:1:2")


def test_one_process_expects_no_communication_and_the_lever_is_plain_words():
    metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.01}
    one = record(0, 0.08, comm=0.0, buckets=(), group=1)
    out = breakdown.time_breakdown([one], metrics, (10.0, "calibrated"), (None, ""), [], [], MEASURE)
    assert out["expected"]["communication_s"] == 0.0 and out["measured"]["communication_s"] == 0.0
    assert out["expected"]["compute_s"] == 0.01 * 1e12 * 0.1 / (10.0 * 1e12)  # measured FLOPs / peak
    assert out["lever"].startswith("compute is 93% of the serialised step (80 ms)")


def test_compute_far_above_its_expected_figure_is_named_overhead_bound():
    """An H200 ran gpt3_tiny's compute in 5.5 ms against 0.0045 ms at the GEMM peak: no faster GEMM helps
    there; gpt2_xl's 127 ms against 52.6 ms (2.4x) is plain compute."""
    one = record(0, 0.08, comm=0.0, buckets=(), group=1)
    for expected_ms, bound in ((0.008, True), (0.08 / 2.4 * 1e3, False)):
        metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": expected_ms / 1e3 * 10.0 / 0.1}
        lever = breakdown.time_breakdown([one], metrics, (10.0, "calibrated"), (None, ""), [], [], MEASURE)["lever"]
        assert ("far from GEMM-bound" in lever) is bound, lever
        if bound:
            assert ("at 50% of the calibrated GEMM peak it would take 0.016 ms: 80 ms to gain; it takes 10,000x its "
                    "time at the full peak: the step is far from GEMM-bound") in lever


def test_a_rounds_logs_give_metrics_time_breakdown_and_show_prints_it(root, tmp_path, accelbench):
    """Breakdown records in the ranks' logs -> the round's metrics.time_breakdown -> the store -> ``show``."""
    from run_benchmarks.execute import outcome
    from run_benchmarks.results.figures import analyze

    from run_benchmarks.results.worker_logs import rank_logs as collect
    from .test_outcomes import _rank_log
    from .test_plan import build
    from .test_results import document, fill

    (case,) = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2").cases
    (rnd,) = case.rounds
    rnd.nodes[0].log_dir.mkdir(parents=True)
    ranks = []
    for rank, compute in ((0, 0.1), (1, 0.3)):
        logs = _rank_log(rnd.nodes[0].log_dir, rank, range(1, 3))
        with open(logs.stdout, "a") as f:
            f.write(perflog.format_record(record(rank, compute)) + "\n")
        ranks.append(collect.read_rank(logs))
    accumulated = analyze.RoundAccumulator()
    for rank in ranks:
        accumulated.add(rank)
    result = outcome.RoundResult(str(case.name), rnd.index, rnd.dir, status="failed")
    outcome.classify(case, rnd, result, "done", ranks, accumulated)
    tb = outcome._time_breakdown(case, ranks, result, [])
    assert tb["measured"]["straggler"]["rank"] == 1 and tb["measured"]["step_time_s"] == 0.1
    assert tb["expected"]["compute_s"] is None and tb["expected"]["communication_s"] is None
    assert tb["expected"]["missing"][0].endswith("run `accelbench calibrate cpu`")  # no calibration stored here
    assert tb["expected"]["missing"][1].endswith("run `accelbench run allreduce:torch:cpu:1:2`")
    assert tb["lever"].startswith("compute is 95% of the serialised step (300 ms); no calibrated GEMM peak prices "
                                  "it; rank 1 is a straggler (compute 300 ms against the median 200 ms: 50% above it")

    doc = document("r1", "gpt2_tiny", "torch", 0.1, world=2)
    doc["metrics"]["time_breakdown"] = tb
    db = tmp_path / "results.db"
    fill(db, [doc])
    shown = accelbench("show", "r1", "--db", str(db)).stdout
    assert "time breakdown per step, measured on 3 serialised steps after the measured ones: compute 300 ms" in shown
    assert "rank 1: compute 300 ms" in shown and "missing: no all-reduce busbw stored for 2 ranks" in shown
    assert "biggest lever: compute is 95% of the serialised step" in shown
    page = accelbench("report", "r1", "--format", "html", "--db", str(db)).stdout
    chart = page[page.index('id="time-breakdown"'):]
    chart = chart[:chart.index("</svg>")]
    assert "measured" in chart and "expected (compute, communication missing)" in chart  # missing: no bar, said


def test_the_end_of_run_table_is_followed_by_each_rounds_biggest_lever(tmp_path):
    from types import SimpleNamespace

    from rich.console import Console

    from run_benchmarks.cli.run_view import print_results
    from run_benchmarks.results.rounds.result import RoundResult

    lever = "communication is 60% of the serialised step (30 ms)"
    done = RoundResult("gpt2_tiny:torch:cpu:1:2", 1, tmp_path / "round1", status="ok",
                       metrics=SimpleNamespace(time_breakdown={"lever": lever}))
    console = Console(record=True, width=200)
    print_results(console, [done], [])
    assert f"gpt2_tiny:torch:cpu:1:2 #1 where the time goes: {lever}" in console.export_text()


def test_compare_names_the_part_that_changed_most():
    a = {"measured": {"compute_s": 0.16, "communication_s": 0.01, "other_s": 0.014}}
    b = {"measured": {"compute_s": 0.17, "communication_s": 0.06, "other_s": 0.034}}
    line = words.changed_part(a, b)
    assert line.startswith("the step's communication changed most: 10 ms -> 60 ms (+50 ms; compute 160 -> 170")
    assert words.changed_part(a, None) is None


def test_delays_where_they_are_not_injected_are_refused_before_anything_starts(accelbench):
    sharded = accelbench("run", "gpt3_tiny:paddle:cpu:1:2", "--set", "parallel.sharding=stage3", "--set",
                         "debug.collective_delay_ms=10", "--dry-run")
    assert sharded.returncode != 0
    assert ("debug.collective_delay_ms (set in --set debug.collective_delay_ms=10) delays Paddle's plain "
            "data-parallel all-reduces, sharding stage1's collectives (data parallelism beside it or not) and "
            "stage2's over the whole data group only; sharding stage3 runs collectives the breakdown does not time "
            "one by one") in sharded.stderr
    assert "fix: unset debug.collective_delay_ms, or set parallel.sharding=none or stage1" in sharded.stderr
    beside = ("--set", "parallel.sharding_parallel_degree=2", "--set", "debug.collective_delay_ms=10", "--dry-run")
    stage2 = accelbench("run", "gpt3_tiny:paddle:H100:1:4", "--set", "parallel.sharding=stage2", *beside)
    assert stage2.returncode != 0 and "sharding stage2 on 2 of 4 data ranks runs collectives" in stage2.stderr
    pp = accelbench("run", "gpt2_tiny:torch:cpu:1:2", "--set", "parallel.pipeline_parallel_degree=2", "--set",
                    "debug.collective_delay_ms=10", "--dry-run")
    assert pp.returncode != 0 and ("debug.collective_delay_ms delays the data-parallel and tensor-parallel "
                                   "collectives only") in pp.stderr
    tp_delay = ("--set", "parallel.tensor_parallel_degree=2", "--set", "debug.collective_delay_ms=10", "--dry-run")
    for case, where in (("gpt3_tiny:paddle:H100:1:2", "on H100, where its loss kernel all-reduces inside C++"),
                        ("gpt3_tiny:paddle:cpu:1:4", "beside 2 data-parallel or sharding ranks")):
        paddle_tp = accelbench("run", case, *tp_delay)
        assert paddle_tp.returncode != 0 and (f"tensor parallel {where} runs collectives the breakdown does not "
                                              "time one by one") in paddle_tp.stderr, case
    # torch's tensor parallel takes the delay (tests/test_breakdown_tp.py), except where CUDA graphs replay it
    tp = ("--set", "parallel.tensor_parallel_degree=2", "--set", "debug.collective_delay_ms=10", "--dry-run")
    assert accelbench("run", "gpt2_tiny:torch:cpu:1:2", *tp).returncode == 0
    graphs = accelbench("run", "gpt2_tiny:torch:H100:1:2", "--set", "train.compile=max-autotune", *tp)
    assert graphs.returncode != 0 and "its CUDA graphs replay them without calling them" in graphs.stderr
    assert "fix: unset debug.collective_delay_ms, or set train.compile=default" in graphs.stderr


@pytest.mark.parametrize("sharding", ["none", "stage1", "stage3"])
def test_ppo_takes_every_delay(accelbench, sharding):
    """torch's PPO loop injects the delays too (training/torch/ppo_loop.py, ppo_breakdown.py): the plan lets
    them by, whatever the roles' strategy."""
    ok = accelbench("run", "ppo_tiny:torch:cpu:1:2", "--set", f"parallel.sharding={sharding}", "--set",
                    "debug.collective_delay_ms=10", "--set", "debug.data_fetch_delay_ms=5", "--set",
                    "debug.compute_delay_ms=5", "--dry-run")
    assert ok.returncode == 0, ok.stderr


def test_paddle_data_parallel_takes_every_delay(accelbench):
    """Paddle's training loop injects the delays too (training/paddle/breakdown.py); the plan lets them by, and
    the collective delay with sharding stage1 (its timed reduces, broadcasts and, beside data parallelism,
    all-reduces) and with tensor parallel alone on a CPU (its timed collectives)."""
    delay = ("--set", "debug.collective_delay_ms=10", "--dry-run")
    for case, settings in (("gpt3_tiny:paddle:cpu:1:2", ("--set", "debug.data_fetch_delay_ms=5", "--set",
                                                         "debug.compute_delay_ms=5")),
                           ("gpt3_tiny:paddle:cpu:1:2", ("--set", "parallel.sharding=stage1")),
                           ("gpt3_tiny:paddle:cpu:1:4", ("--set", "parallel.sharding=stage1", "--set",
                                                         "parallel.sharding_parallel_degree=2")),
                           ("gpt3_tiny:paddle:cpu:1:2", ("--set", "parallel.tensor_parallel_degree=2"))):
        ok = accelbench("run", case, *settings, *delay)
        assert ok.returncode == 0, (settings, ok.stderr)


def test_a_layout_without_a_measured_breakdown_prices_no_communication():
    metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.005}
    skipped = [perflog.BreakdownRecord(rank=r, steps=0, not_measured="not measured for sharding stage2")
               for r in (0, 1)]
    out = breakdown.time_breakdown(skipped, metrics, (10.0, "calibrated"), (None, ""), [], [allreduce_row()], MEASURE)
    assert out["measured"] == {"not_measured": "not measured for sharding stage2"} and out["lever"] is None
    assert out["expected"]["communication_s"] is None and out["expected"]["compute_s"] == 0.005 * 1e12 * 0.1 / (10.0 * 1e12)
    assert words.describe(out)[0] == "time breakdown: not measured for sharding stage2"


def test_instruction_data_expects_the_compute_of_the_measured_flops_not_padded_tokens():
    """Finetune/LoRA: padding is no model work, so the expected compute is the FLOPs the row's MFU counts
    (tflops_per_device x mean step time), not flops_per_token x tokens_per_step (padding at seq_len)."""
    step_times = [0.2, 0.3, 0.25]
    flops_per_step = 4e11  # real tokens only, on each device, in each measured step
    tflops = 3 * flops_per_step / math.fsum(step_times) / 1e12  # figures/analyze.py's definition
    metrics = {"step_time_s": {"median": 0.25, "mean": math.fsum(step_times) / 3}, "tflops_per_device": tflops,
               "flops_per_token": 1e6, "tokens_per_step": 8_000_000, "world_size": 1}  # padded: 8e12, not this
    one = record(0, 0.2, comm=0.0, buckets=(), group=1)
    out = breakdown.time_breakdown([one], metrics, (10.0, "calibrated"), (20.0, "datasheet"), [], [], MEASURE)
    assert out["expected"]["compute_s"] == tflops * 1e12 * metrics["step_time_s"]["mean"] / (10.0 * 1e12)
    assert out["expected"]["compute_s"] == pytest.approx(flops_per_step / 10e12)
    assert out["expected"]["compute_s_datasheet"] == pytest.approx(flops_per_step / 20e12)


@pytest.mark.parametrize("bad", [dict(compute_s=[]), dict(compute_s=["x", 0.1, 0.1]),
                                 dict(step_s=[0.1, float("nan"), 0.1]), dict(wait_s=[True, 0.0, 0.0])])
def test_a_malformed_breakdown_record_is_refused_like_other_malformed_records(bad):
    good = perflog.from_payload(json.loads(perflog.format_record(record(0, 0.1))[len(perflog.PREFIX):]))
    assert good == record(0, 0.1)
    payload = {"v": perflog.SCHEMA_VERSION, **{**good.__dict__, **bad}}
    with pytest.raises(perflog.PerfLogError, match="breakdown record: .* must hold 3 finite numbers"):
        perflog.from_payload(payload)
    assert perflog.BreakdownRecord(rank=0, steps=0, not_measured="why").compute_s == []  # nothing to hold


def test_a_failing_breakdown_assembly_becomes_a_warning_not_a_lost_round(monkeypatch):
    from types import SimpleNamespace

    from run_benchmarks.execute import outcome

    def broken(*args):
        raise statistics_error

    statistics_error = ValueError("median of an empty list")
    monkeypatch.setattr(outcome, "_time_breakdown", broken)
    result = SimpleNamespace(metrics=object(), warnings=[])
    outcome._add_time_breakdown(None, [], result, [])
    assert result.warnings == ["time breakdown left out: ValueError: median of an empty list"]


def test_each_rank_is_read_at_its_median_step_so_its_phases_add_up():
    """Three steps whose phase-by-phase medians would not add up (one step's compute spiked, another's
    optimizer): every figure comes from the step whose whole time is the median."""
    from training.contract import perflog

    rec = perflog.BreakdownRecord(rank=0, steps=3, data_s=[0.0, 0.0, 0.0], compute_s=[0.30, 0.20, 0.10],
                                  wait_s=[0.0, 0.0, 0.0], communication_s=[0.0, 0.0, 0.0],
                                  optimizer_s=[0.05, 0.05, 0.30], step_s=[0.35, 0.25, 0.40],
                                  compute_parts={"actor": [0.2, 0.12, 0.06], "critic": [0.1, 0.08, 0.04]},
                                  group_size=1, method="m")
    m = breakdown.measured([rec], 0.3)
    (row,) = m["per_rank"]
    assert (row["step_s"], row["compute_s"], row["optimizer_s"]) == (0.35, 0.30, 0.05)  # step 0: the median 0.35
    assert sum(row["compute_parts"].values()) == pytest.approx(row["compute_s"])
    assert m["compute_s"] + m["communication_s"] + m["other_s"] == pytest.approx(m["serialised_step_s"])

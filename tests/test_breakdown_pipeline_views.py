"""The pipeline's time breakdown in the orchestrator, in-process, from canned records: the schedule's ideal bubble
exactly by its formula, the slowest stage named, the waiting as its own part of the step, the slowest stage's P2P
sends priced at the stored sendrecv busbw (or the command that measures it named), and ``show``'s, the lever's and
compare's words for a pipeline."""
from __future__ import annotations

import json

import pytest

from run_benchmarks.results.breakdown import step as breakdown, pipeline as breakdown_pipeline
from run_benchmarks.results.breakdown import words
from training.contract import perflog

MEASURE = "accelbench run {op}:torch:cpu:1:2"
ACTIVATION = 2 * 16 * 32 * 4  # micro_batch_size x seq_len x d_model x fp32


def record(rank: int, compute: float, waiting: float, schedule: str = "1f1b", ranks: int = 2, v: int = 1,
           micro: int = 4, tied: bool = True) -> perflog.BreakdownRecord:
    stages = [rank + ranks * i for i in range(v)]
    sends = sum(micro * ((s < ranks * v - 1) + (s > 0)) for s in stages)  # activations forward, gradients back
    return perflog.BreakdownRecord(
        rank=rank, steps=3, data_s=[0.002] * 3, compute_s=[compute, compute, 9.0], wait_s=[0.001] * 3,
        communication_s=[0.004] * 3, optimizer_s=[0.003] * 3, step_s=[compute + waiting + 0.010] * 3,
        pipeline_wait_s=[waiting] * 3, bucket_bytes=[4096] if tied else [], collective_ops=["allreduce"] if tied else [],
        group_size=2 if tied else 1, method="m",
        pipeline={"schedule": schedule, "ranks": ranks, "stages": ranks * v, "stages_per_rank": v,
                  "micro_batches": micro, "stage_ids": stages, "sends": sends,
                  "send_bytes": sends * ACTIVATION})


def allreduce_row(points=((4096, 2.0),)) -> dict:
    figures = [{"name": "allreduce.busbw_gbps", "value": gbps, "params": {"bytes": size, "ranks": 2}}
               for size, gbps in points]
    return {"status": "ok", "case_name": "allreduce", "run_id": "r1", "figures": figures,
            "environment": {"nodes": [{"environment": {"hostname": "h"}}]}}


def sendrecv_row(points=((ACTIVATION, 3.0),), ranks: int = 2, framework: str = "torch", host: str = "h",
                 run: str = "s1") -> dict:
    figures = [{"name": "sendrecv.busbw_gbps", "value": gbps, "params": {"bytes": size, "ranks": ranks}}
               for size, gbps in points]
    return {"status": "ok", "case_name": f"sendrecv:{framework}:cpu:1:{ranks}", "run_id": run, "framework": framework,
            "figures": figures, "environment": {"nodes": [{"environment": {"hostname": host}}]}}


METRICS = {"step_time_s": {"median": 0.3, "mean": 0.3}, "tflops_per_device": 0.01}
NODES = [{"host": "h", "environment": {"hostname": "h"}}]


@pytest.mark.parametrize("schedule, p, m, v, fraction", [
    ("gpipe", 4, 8, 1, 3 / 11), ("1f1b", 2, 4, 1, 1 / 5), ("1f1b", 8, 8, 1, 7 / 15), ("interleaved", 2, 4, 2, 1 / 9),
    ("interleaved", 4, 8, 3, 3 / 27)])
def test_the_expected_bubble_is_the_schedules_formula_exactly(schedule, p, m, v, fraction):
    """GPipe and 1F1B: (p-1)/(m+p-1); interleaved 1F1B with v stages per rank: (p-1)/(v*m+p-1); the bubble in
    seconds is the expected compute x (p-1)/(v*m), the same fraction of compute + bubble."""
    assert breakdown_pipeline.bubble_fraction(schedule, p, m, v) == fraction
    recs = [record(r, 0.1, 0.05, schedule, p, v, m) for r in range(p)]
    tb = breakdown.time_breakdown(recs, METRICS, (10.0, "calibrated"), (None, ""), NODES, [], MEASURE)
    e = tb["expected"]
    compute = 0.01 * 1e12 * 0.3 / (10.0 * 1e12)  # the step's FLOPs on one device / the calibrated peak
    assert e["compute_s"] == compute and e["bubble_fraction"] == fraction
    assert e["bubble_s"] == compute * (p - 1) / (v * m)
    assert e["bubble_s"] / (e["bubble_s"] + compute) == pytest.approx(fraction, rel=1e-12)
    assert e["bubble_formula"].startswith(f"{schedule}: {breakdown_pipeline.FORMULAS[schedule]} with p={p}, m={m}")
    with pytest.raises(ValueError, match="no bubble formula for pipeline schedule 'zero-bubble'"):
        breakdown_pipeline.bubble_fraction("zero-bubble", p, m)


def test_the_slowest_stage_is_named_and_its_waiting_is_the_pipelines():
    part = breakdown.measured([record(0, 0.10, 0.25), record(1, 0.30, 0.05)], step_time_s=0.32)
    assert part["compute_s"] == 0.30 and part["pipeline_wait_s"] == 0.05  # the slowest stage's own
    assert part["waiting_fraction"] == 0.05 / 0.35
    assert part["other_s"] == pytest.approx(0.30 + 0.05 + 0.010 - 0.30 - 0.004 - 0.05)  # data, optimizer, host
    assert part["straggler"]["rank"] == 1 and part["straggler"]["stages"] == [1]
    assert [row["pipeline_wait_s"] for row in part["per_rank"]] == [0.25, 0.05]  # the fast stage waits for it
    assert part["pipeline"] == {"schedule": "1f1b", "ranks": 2, "stages": 2, "stages_per_rank": 1,
                                "micro_batches": 4, "sends": 8, "send_bytes": 8 * ACTIVATION, "slowest_rank": 1,
                                "slowest_sends": 4, "slowest_send_bytes": 4 * ACTIVATION}
    assert [(row["sends"], row["send_bytes"]) for row in part["per_rank"]] == [(4, 4 * ACTIVATION)] * 2
    assert breakdown.measured([record(0, 0.10, 0.05), record(1, 0.105, 0.05)], 0.2)["straggler"] is None


def test_p2p_missing_names_the_sendrecv_command_and_the_tied_embedding_is_priced():
    recs = [record(0, 0.1, 0.05), record(1, 0.1, 0.05)]
    elsewhere = sendrecv_row(host="other")  # another host's, and a 4-rank figure: neither prices these sends
    tb = breakdown.time_breakdown(recs, METRICS, (10.0, "calibrated"), (None, ""), NODES,
                                  [allreduce_row(), elsewhere, sendrecv_row(ranks=4)], MEASURE, framework="torch")
    e = tb["expected"]
    assert e["p2p_s"] is None and e["p2p_sends"] == 8 and e["p2p_bytes"] == 8 * ACTIVATION
    assert e["missing"] == [f"no sendrecv busbw stored for 2 ranks on these hosts: run `accelbench run "
                            f"sendrecv:torch:cpu:1:2`; until then the pipeline's P2P transfers (4 sends, "
                            f"{4 * ACTIVATION:,} bytes per step on the slowest stage) are not priced"]
    assert e["communication_s"] == 4096 * 2 * 1 / 2 / 2e9  # the tied embedding's all-reduce over its two ranks
    untied = breakdown.time_breakdown([record(r, 0.1, 0.05, tied=False) for r in (0, 1)], METRICS, (10.0, "c"),
                                      (None, ""), NODES, [], MEASURE)
    assert untied["expected"]["communication_s"] == 0.0
    assert untied["expected"]["communication_note"] == "no gradient collective: the stages hold disjoint parameters"
    # a 4-stage pipeline on one host of 4 processes: its sends are between two ranks, so a 2-rank case
    four = breakdown.time_breakdown([record(r, 0.1, 0.05, ranks=4, tied=False) for r in range(4)], METRICS, (10.0, "c"),
                                    (None, ""), NODES, [], "accelbench run {op}:torch:cpu:1:4")
    (why,) = four["expected"]["missing"]
    assert "run `accelbench run sendrecv:torch:cpu:1:2`" in why


@pytest.mark.parametrize("schedule, p, v, slowest, sends", [("1f1b", 2, 1, 1, 4), ("gpipe", 4, 1, 2, 8),
                                                            ("interleaved", 2, 2, 0, 12)])
def test_p2p_is_the_slowest_stages_bytes_over_the_stored_sendrecv_busbw_exactly(schedule, p, v, slowest, sends):
    """time = sum over the slowest stage's sends of send bytes / busbw(sendrecv, 2 ranks, nearest size): each send
    one activation (4 KiB here), read at the 4 KiB point; a middle stage sends both ways (8), an interleaved rank
    for two stages (12). The same hosts' 2-rank figure of the round's framework, not paddle's newer one, not
    the 4-rank one."""
    recs = [record(r, 0.3 if r == slowest else 0.1, 0.05, schedule, p, v) for r in range(p)]
    rows = [sendrecv_row(((1024, 1.0), (ACTIVATION, 3.0), (1 << 20, 9.0))), sendrecv_row(((ACTIVATION, 50.0),), 4),
            sendrecv_row(((ACTIVATION, 7.0),), framework="paddle", run="s2")]
    tb = breakdown.time_breakdown(recs, METRICS, (10.0, "calibrated"), (None, ""), NODES, rows, MEASURE,
                                  framework="torch")
    e = tb["expected"]
    assert e["p2p_rank"] == slowest and e["p2p_rank_sends"] == sends and e["p2p_rank_bytes"] == sends * ACTIVATION
    assert e["p2p_s"] == sends * ACTIVATION / (3.0 * 1e9)
    assert e["p2p_busbw"] == {"op": "sendrecv", "send_bytes": ACTIVATION, "ranks": 2, "busbw_gbps": 3.0,
                              "measured_at_bytes": ACTIVATION, "source": "sendrecv:torch:cpu:1:2, run s1"}
    assert e["p2p_missing"] is None and not any("sendrecv" in why for why in e["missing"])
    assert e["p2p_price_formula"] == breakdown_pipeline.P2P_PRICE and "upper bound" in e["p2p_price_formula"]
    line = next(line for line in words.describe(tb) if line.startswith("  expected pipeline bubble"))
    assert line.endswith(f"; P2P at most {sends * ACTIVATION / 3e9 * 1e3:.3g} ms: rank {slowest}'s {sends} sends of "
                         f"{ACTIVATION:,} bytes at the stored sendrecv busbw 3 GB/s (2 ranks, measured at "
                         f"{ACTIVATION:,} bytes; sendrecv:torch:cpu:1:2, run s1) [{breakdown_pipeline.P2P_PRICE}]")
    other = breakdown.time_breakdown(recs, METRICS, (10.0, "c"), (None, ""), NODES, rows, MEASURE, framework="paddle")
    assert other["expected"]["p2p_s"] == sends * ACTIVATION / (7.0 * 1e9)  # paddle's own where it has one


def test_show_the_lever_and_compare_read_as_a_pipeline():
    recs = [record(0, 0.05, 0.40), record(1, 0.30, 0.15)]
    tb = breakdown.time_breakdown(recs, METRICS, (10.0, "calibrated"), (None, ""), NODES, [allreduce_row()], MEASURE)
    lines = words.describe(tb)
    assert lines[0].startswith("time breakdown per step, measured on 3 serialised steps after the measured ones: "
                               "compute 300 ms, pipeline waiting 150 ms, communication 4 ms (1 allreduce, 4,096 bytes)")
    assert lines[1] == (f"  pipeline 1f1b over 2 ranks, 2 stages, 4 micro-batches: its waiting is the bubble and the "
                        f"P2P transfers together, 33% of the slowest stage's compute + waiting; 8 P2P sends, "
                        f"{8 * ACTIVATION:,} bytes per step")
    assert "  expected pipeline bubble: 20% of compute + bubble [1f1b: (p-1)/(m+p-1) with p=2, m=4], 0.075 ms at the " \
           "calibrated GEMM peak; P2P not priced (missing below)" in lines
    assert "  rank 0 (stage 0): compute 50 ms, pipeline waiting 400 ms, wait 1 ms, communication 4 ms, data 2 ms, " \
           "optimizer 3 ms" in lines
    assert tb["lever"] == ("compute is 65% of the serialised step (300 ms); at 50% of the calibrated GEMM peak it "
                           "would take 0.6 ms: 299 ms to gain; " + words.OVERHEAD_BOUND.format(ratio=1000)
                           + "; rank 1 (stage 1) is the pipeline's slowest stage (compute 300 ms against the "
                           "median 175 ms): the other stages wait for it")
    waiting = breakdown.time_breakdown([record(0, 0.1, 0.5), record(1, 0.1, 0.5)], METRICS, (None, "no peak"),
                                       (None, ""), NODES, [], MEASURE)
    assert waiting["lever"] == ("pipeline waiting (bubble and P2P transfers) is 82% of the serialised step (500 ms); "
                                "the 1f1b schedule's ideal bubble is 20% (1f1b: (p-1)/(m+p-1) with p=2, m=4): more "
                                "micro-batches shrink it")
    priced = breakdown.time_breakdown([record(0, 0.1, 0.5), record(1, 0.1, 0.5)], METRICS, (None, "no peak"),
                                      (None, ""), NODES, [sendrecv_row()], MEASURE)
    assert priced["lever"] == waiting["lever"] + (f"; its P2P sends at the sendrecv bandwidth these hosts measured "
                                                  f"take at most {4 * ACTIVATION / 3e9 * 1e3:.3g} ms of it")
    line = words.changed_part(waiting, tb)
    assert line.startswith("the step's pipeline waiting changed most: 500 ms -> 150 ms (-350 ms; compute 100 -> 300, "
                           "communication 4 -> 4, pipeline waiting 500 -> 150, other")
    ddp = {"measured": {"compute_s": 0.1, "communication_s": 0.05, "other_s": 0.01}}
    assert "pipeline waiting 0 -> 150" in words.changed_part(ddp, tb)  # a step without a pipeline waits on none


def test_a_pipeline_record_round_trips_and_a_malformed_one_is_refused():
    good = record(0, 0.1, 0.05)
    line = perflog.format_record(good)
    assert perflog.parse_line(line) == good
    payload = {**json.loads(line[len(perflog.PREFIX):]), "pipeline_wait_s": [0.1, float("nan"), 0.1]}
    with pytest.raises(perflog.PerfLogError, match="pipeline_wait_s must hold 3 finite numbers"):
        perflog.from_payload(payload)
    with pytest.raises(perflog.PerfLogError, match="pipeline must be an object"):
        perflog.from_payload({**json.loads(line[len(perflog.PREFIX):]), "pipeline": [1]})
    assert perflog.BreakdownRecord(rank=0, steps=1, data_s=[0.0], compute_s=[0.0], wait_s=[0.0], communication_s=[0.0],
                                   optimizer_s=[0.0], step_s=[0.0]).pipeline_wait_s == []  # no pipeline: none


def test_delays_on_a_torch_pipeline_are_the_ones_it_injects(accelbench):
    """A compute delay (on fail_rank, before its schedule step: its compute) and a data-fetch delay run on a torch
    pipeline; a collective delay is refused: a pipeline-only layout has no data-parallel collective to delay."""
    base = ("run", "gpt2_tiny:torch:cpu:1:2", "--set", "parallel.pipeline_parallel_degree=2", "--set",
            "train.gradient_accumulation_steps=2", "--dry-run")
    ok = accelbench(*base, "--set", "debug.compute_delay_ms=10", "--set", "debug.fail_rank=1", "--set",
                    "debug.data_fetch_delay_ms=5")
    assert ok.returncode == 0, ok.stderr
    refused = accelbench(*base, "--set", "debug.collective_delay_ms=10")
    assert refused.returncode != 0
    assert "debug.collective_delay_ms delays the data-parallel and tensor-parallel collectives only" in refused.stderr
    # a check across keys names where the key it is about was set (the --set), not the case file's top level
    assert "debug.collective_delay_ms set in --set debug.collective_delay_ms=10: " in refused.stderr
    assert "(top level)" not in refused.stderr


def test_pipeline_x_data_parallel_says_why_it_is_not_measured():
    """The one pipeline layout the worker leaves unmeasured (training/torch/breakdown_pp.py says why in full)."""
    from types import SimpleNamespace

    from training.torch.breakdown import uncovered

    from .torch_ranks import worker_config

    spec = worker_config(dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16),
                         dict(micro_batch_size=2, gradient_accumulation_steps=2, steps=2, warmup_steps=1),
                         {"pipeline_parallel_degree": 2, "sharding": "stage2"}).workload
    why = uncovered(spec, SimpleNamespace(pipeline=object(), dp_size=2))
    assert why.startswith("not measured for pipeline x data parallel: FSDP2's all-gathers and reduce-scatters")
    assert uncovered(spec, SimpleNamespace(pipeline=object(), dp_size=1)) is None

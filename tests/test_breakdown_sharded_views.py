"""The time breakdown beyond DDP, in-process: sharded layouts priced per collective with each operation's own
bus-bandwidth factor and stored figure, energy over the measured steps with its method, and compare's "which
part changed" line in Markdown and HTML."""
from __future__ import annotations

import math

from run_benchmarks.execute import monitoring
from run_benchmarks.results.breakdown import step as breakdown
from run_benchmarks.results.breakdown import words

MEASURE = "accelbench run {op}:torch:cpu:1:2"


def micro_row(op: str, points, hosts=("h",), ranks=2) -> dict:
    figures = [{"name": f"{op}.busbw_gbps", "value": gbps, "params": {"bytes": size, "ranks": ranks}}
               for size, gbps in points]
    return {"status": "ok", "case_name": op, "run_id": f"run-{op}", "figures": figures,
            "environment": {"nodes": [{"environment": {"hostname": h}} for h in hosts]}}


def test_zero2_collectives_are_priced_each_by_its_own_formula_and_stored_figure():
    rows = [micro_row("allgather", [(1 << 20, 3.0)]), micro_row("reducescatter", [(1 << 20, 1.5), (8 << 20, 6.0)]),
            micro_row("broadcast", [(1 << 20, 2.0)]), micro_row("allreduce", [(1 << 20, 9.0)])]
    points = {op: breakdown.busbw_points(rows, frozenset({"h"}), 2, op) for op in ("allgather", "reducescatter",
                                                                                  "broadcast")}
    ops, sizes = ["allgather", "reducescatter", "reducescatter", "broadcast"], [1 << 20, 1 << 20, 8 << 20, 3 << 20]
    out = breakdown.expected(1e9, (10.0, "calibrated"), (None, ""), sizes, 2, points, MEASURE, ops)
    # all-gather and reduce-scatter: bytes x (n-1)/n / busbw; broadcast: bytes x 1 / busbw (nccl-tests)
    assert out["communication_s"] == math.fsum([(1 << 20) * 0.5 / 3e9, (1 << 20) * 0.5 / 1.5e9,
                                                (8 << 20) * 0.5 / 6e9, (3 << 20) * 1.0 / 2e9])
    assert [b["busbw_gbps"] for b in out["busbw"]] == [3.0, 1.5, 6.0, 2.0]  # each at its own nearest size
    assert "reducescatter: time = bytes x (n-1)/n / busbw(reducescatter)" in out["communication_formula"]
    assert "broadcast: time = bytes x 1 / busbw(broadcast)" in out["communication_formula"]
    assert out["missing"] == []


def test_a_missing_operation_names_its_own_micro_case_and_prices_nothing():
    points = {"allgather": breakdown.busbw_points([micro_row("allgather", [(1 << 20, 3.0)])], frozenset({"h"}), 2,
                                                  "allgather"), "reducescatter": []}
    out = breakdown.expected(1e9, (10.0, "c"), (None, ""), [1 << 20, 1 << 20], 2, points, MEASURE,
                             ["allgather", "reducescatter"])
    assert out["communication_s"] is None
    assert out["missing"] == ["no reducescatter busbw stored for 2 ranks on these hosts: run "
                              "`accelbench run reducescatter:torch:cpu:1:2`"]


def test_show_names_the_collectives_by_operation():
    from training.contract import perflog

    recs = [perflog.BreakdownRecord(rank=r, steps=1, data_s=[0.0], compute_s=[0.1], wait_s=[0.0],
                                    communication_s=[0.02], optimizer_s=[0.0], step_s=[0.12],
                                    bucket_bytes=[10, 10, 20], collective_ops=["allgather", "allgather", "reducescatter"],
                                    group_size=2, method="m") for r in (0, 1)]
    metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.005}
    tb = breakdown.time_breakdown(recs, metrics, (None, "no peak"), (None, ""), [], [], MEASURE)
    assert "(2 allgather + 1 reducescatter, 40 bytes)" in words.describe(tb)[0]


def monitor(power_from, window=monitoring.MEASURED_STEPS, watts=(50.0, 30.0), tokens_per_s=400.0) -> dict:
    """The round's monitor summary as summarize_round makes it, from one node's devices read over ``window``."""
    devices = [{"power_w": {"mean": w, "max": w}, "power_from": power_from} for w in watts]
    return monitoring.summarize_round([{"devices": devices, "window": {"accelerator": window}}], tokens_per_s)


def test_energy_per_token_over_the_measured_steps_with_its_method():
    got = monitoring.energy(monitor("energy counter"), tokens_per_s_total=400.0)
    assert got["energy_per_token_j"] == 80.0 / 400.0 and got["tokens_per_kwh"] == 400.0 / 80.0 * 3.6e6
    assert got["method"] == monitoring.COUNTER_METHOD
    assert monitoring.energy(monitor("power samples"), 400.0)["method"] == monitoring.SAMPLES_METHOD
    whole = monitoring.energy(monitor("power samples", window=monitoring.WHOLE_ROUND), 400.0)
    assert whole["energy_per_token_j"] is None and "warm-up would count" in whole["note"]
    # one figure, one window: the round's tokens/J is not read over the whole round either
    assert monitor("power samples", window=monitoring.WHOLE_ROUND)["tokens_per_joule"] is None
    bare = {"window": monitoring.MEASURED_STEPS, "nodes": [{"devices": [{"util_percent": {"mean": 90.0}}]}]}
    assert monitoring.energy(bare, 400.0)["note"] == "no power reading"  # a CPU without RAPL
    tb = {"measured": {"not_measured": "x"}, "expected": {}, "energy": monitoring.energy(monitor("energy counter"), 400.0)}
    assert words.describe(tb)[-1].startswith("  energy over the measured steps: 0.2 J per token, 1.8e+07 tokens")


def test_compare_says_which_part_changed_in_markdown_and_html(tmp_path, accelbench):
    from .test_results import document, fill

    docs = []
    for run_id, comm in (("run-a", 0.01), ("run-b", 0.06)):
        doc = document(run_id, "gpt2_tiny", "torch", 0.2)
        doc["metrics"]["time_breakdown"] = {"measured": {"compute_s": 0.16, "communication_s": comm, "other_s": 0.014,
                                                         "serialised_step_s": 0.174 + comm, "breakdown_steps": 3,
                                                         "gradient_bytes": 4096}, "expected": {}}
        docs.append(doc)
    db = tmp_path / "results.db"
    fill(db, docs)
    md = accelbench("compare", "run-a", "run-b", "--db", str(db), "--format", "markdown").stdout
    assert "Where the step's time moved (time breakdown):" in md
    assert "the step's communication changed most: 10 ms -> 60 ms (+50 ms" in md
    page = tmp_path / "compare.html"
    accelbench("compare", "run-a", "run-b", "--db", str(db), "--html", str(page))
    html = page.read_text()
    assert "Where the step's time moved" in html and "communication changed most: 10 ms -&gt; 60 ms" in html


def workload(parallel: dict, precision: str = "bf16"):
    from training.contract.spec import WorkloadSpec

    return WorkloadSpec.model_validate({
        "model": {"n_layer": 3, "n_head": 2, "d_model": 64, "vocab_size": 128, "seq_len": 32},
        "train": {"micro_batch_size": 2, "gradient_accumulation_steps": 2, "precision": precision, "steps": 2,
                  "warmup_steps": 1},
        "parallel": parallel})


def test_tensor_parallel_is_priced_by_construction_per_block_exactly():
    from run_benchmarks.results.breakdown import layouts as breakdown_layouts
    from training.contract import perflog

    collectives, group, text = breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2}), 2)
    activation = 2 * 32 * 64 * 2  # micro_batch_size x seq_len x d_model x bf16
    # per block 2 forward + 4 backward (q, k, v, fc: each column-parallel input's gradient); 3 blocks, 2 micro
    assert group == 2 and collectives == [("allreduce", activation)] * (6 * 3 * 2)
    sp, _, _ = breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2, "sequence_parallel": True}), 2)
    assert sorted(set(sp)) == [("allgather", activation), ("reducescatter", activation)] and len(sp) == 8 * 3 * 2
    assert breakdown_layouts.tensor_parallel(workload({"tensor_parallel_degree": 2}), 4) is None  # DP beside TP
    skipped = [perflog.BreakdownRecord(rank=r, steps=0, not_measured="not measured for tensor parallel")
               for r in (0, 1)]
    metrics = {"step_time_s": {"median": 0.1, "mean": 0.1}, "tflops_per_device": 0.005}
    rows = [micro_row("allreduce", [(activation, 2.0)])]
    tb = breakdown.time_breakdown(skipped, metrics, (10.0, "c"), (None, ""), [{"host": "h", "environment": {
        "hostname": "h"}}], rows, MEASURE, (collectives, group, text))
    assert tb["expected"]["communication_s"] == math.fsum([activation * 2 * 1 / 2 / 2e9] * 36)
    assert tb["expected"]["communication_formula"].startswith("tensor parallel: per block and micro-batch 2 ")
    assert tb["measured"] == {"not_measured": "not measured for tensor parallel"}

"""``accelbench table mfu``: the "Benchmark LLM Training" repository's MFU tables beside our runs, in this
process: the published figures with nothing run, the conversion of the source's FLOP formula into ours (against
a parameter count of the model torch builds), our synthetic store rows placed into their cells with the ratio
(a twin's labelled), the shipped sweeps' points each placed into the cell they name, and the proxy's shape
against Llama 3.1 70B's published configuration."""
from __future__ import annotations

import json

import pytest
import torch

from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.tables import TABLES, mfu
from run_benchmarks.results.tables.core import build
from run_benchmarks.results.tables.render import ratio_text
from run_benchmarks.sweep.grid import expand, load_sweep_file
from training.contract import flops
from training.contract.perflog import EndRecord, StartRecord, StepRecord
from training.contract.spec import ModelSpec

from .conftest import ROOT
from .test_results import fill

PEAK = {"H100": 989.5, "cpu": None}
H100 = mfu.TABLE.measures[0]


def doc(run_id: str, case_name: str, sets: tuple[str, ...], tflops: float, status: str = "ok") -> dict:
    """One round of ``case_name`` planned with ``sets``, every rank's steps at the time that gives ``tflops``
    TFLOP/s per device in our formula (figures/analyze.py computes the figures from the perf records)."""
    plan = build_run_plan(load_inputs(ROOT), [case_name], "mfu", ROOT / "logs-unused", None, sets)
    (case,) = plan.cases
    spec, name = case.workload, case.name
    per_token, formula = flops.flops_per_token(spec.model, spec.train)
    tokens = spec.train.micro_batch_size * spec.model.seq_len * spec.train.gradient_accumulation_steps
    step_time = per_token * tokens / (tflops * 1e12)
    world = name.world_size
    ranks = []
    for rank in range(world):
        log = collect.RankLog(rank, start=StartRecord(
            rank=rank, local_rank=rank, node_rank=0, world_size=world, framework="torch", framework_version="2",
            device="cuda", precision=spec.train.precision, n_params=1, flops_per_token=per_token,
            flop_formula=formula, tokens_per_step=tokens),
            end=EndRecord(rank=rank, steps=4, peak_memory_bytes=2**30, memory_total_bytes=2**36,
                          memory_kind="allocated"))
        for step in range(4):
            log.series.add_record(StepRecord(rank=rank, step=step, warmup=step < 1, step_time_s=step_time,
                                             tokens=tokens, loss=5.0))
        ranks.append(log)
    metrics = analyze.round_metrics(ranks, PEAK[name.hardware], "datasheet", spec.train.micro_batch_size)
    return {"run_id": run_id, "case_name": str(name), "round": 1, "status": status, "reason": "",
            "case": {"case": name.case, "framework": "torch", "framework_version": "", "hardware": name.hardware,
                     "vendor": "cpu" if name.hardware == "cpu" else "nvidia", "nnodes": 1,
                     "nprocs_per_node": name.nprocs_per_node, "world_size": world, "repeat": 1,
                     "extern_config": None, "extern_config_hash": None},
            "metrics": metrics.to_dict(), "workload": spec.model_dump(mode="json"),
            "environment": {"nodes": [{"node_rank": 0, "host": "h"}]},
            "started_at": "2026-11-28T10:00:00+00:00", "ended_at": "2026-11-28T10:00:30+00:00",
            "wall_time_s": 30.0, "warnings": [], "error_lines": []}


GPT2 = ("model.vocab_size=50304", "train.micro_batch_size=8", "train.precision=bf16")


def built(db):
    with ResultStore(db) as store:
        return build(mfu.TABLE, summarize(store.attempts()))


def rows_of(table, cell_id):
    return [r for r in table.rows if r.cell.id == cell_id]


def test_with_nothing_run_the_table_shows_every_published_figure_and_why_each_cell_is_not_run(accelbench, tmp_path):
    done = accelbench("table", "mfu", "--db", tmp_path / "none.db", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc_ = json.loads(done.stdout)
    assert doc_["table"] == "mfu" and len(doc_["rows"]) == 22 and doc_["sources"]["llm-train-bench"]["hardware"] == "H100"
    single = {(r["labels"]["config"], r["labels"]["model"]): r for r in doc_["rows"] if r["labels"]["layout"] == "single GPU"}
    printed = {k: r["measures"]["h100"]["published"]["printed"] for k, r in single.items()}
    assert printed == {("MP", "gpt2-1.5b"): "350 TFLOP/s (35% MFU)", ("MP", "llama-3.1-70b-proxy"): "700 TFLOP/s (70% MFU)",
                       ("MP + PC", "gpt2-1.5b"): "400 TFLOP/s (40% MFU)",
                       ("MP + PC", "llama-3.1-70b-proxy"): "790 TFLOP/s (80% MFU)",
                       ("MP + FP8", "gpt2-1.5b"): "400 TFLOP/s (20% MFU)",
                       ("MP + FP8", "llama-3.1-70b-proxy"): "1,200 TFLOP/s (60% MFU)"}
    assert all(r["not_run_because"] == "not run" and r["ran_on"] is None for r in single.values())
    # a cell not run shows what the shipped sweep would run for it
    assert single[("MP + PC", "gpt2-1.5b")]["settings"] == (
        'gpt2_xl:torch:H100:1:1 --set train.steps=20 --set train.warmup_steps=5 --set train.precision="bf16" '
        '--set model.vocab_size=50304 --set train.micro_batch_size=8 --set train.compile="default"')
    several = [r for r in doc_["rows"] if r["labels"]["layout"] != "single GPU"]
    assert len(several) == 16 and all("needs several GPUs" in r["not_run_because"] for r in several)
    crashed = [r for r in several if r["labels"]["config"] == "MP + SAC + PC" and r["labels"]["model"] == "llama-3.1-8b"]
    assert crashed[0]["measures"]["h100"]["published"]["printed"] == "Crashes"
    assert crashed[0]["measures"]["h100"]["published"]["in_our_units"] is None
    text = accelbench("table", "mfu", "--db", tmp_path / "none.db", "--format", "markdown").stdout
    assert "Transformer Engine, which cannot be installed" in text and "our formula" in text


def test_the_source_formula_counts_every_parameter_of_the_model_and_converts_into_ours():
    """The source's FLOPs per token (6 x every parameter of the model it builds, + 12LHQT) against ours, for
    each shape it ran: the parameters counted on the model torch builds from that shape (meta device)."""
    from training.torch.model import GPT

    models = mfu.TABLE.published().models
    for name, shape in models.items():
        spec = ModelSpec(**shape)
        with torch.device("meta"):
            counted = sum(p.numel() for p in GPT(spec).parameters())  # tied weights once, as the source counts
        source = 6 * counted + 12 * spec.n_layer * spec.n_head * spec.head_dim * spec.seq_len
        assert mfu.TABLE.factor(name) == pytest.approx(flops.training_flops_per_token(spec) / source, rel=1e-12)
    cell = next(c for c in mfu.TABLE.cells(mfu.TABLE.published()) if c.id == "single-pc-proxy")
    figure = cell.published["h100"][0]
    proxy = ModelSpec(**models["llama-3.1-70b-proxy"])
    embedding = proxy.vocab_size * proxy.d_model  # the lookup the source counts as 6 FLOPs per weight
    assert mfu.TABLE.factor("llama-3.1-70b-proxy") < 0.7 and embedding > 1e9
    assert mfu.TABLE.published_value(H100, figure, cell) == pytest.approx(790 * mfu.TABLE.factor("llama-3.1-70b-proxy"))


def test_runs_are_placed_into_their_cells_with_the_ratio_and_a_twin_says_so(tmp_path):
    db = tmp_path / "mfu.db"
    fill(db, [doc("r1", "gpt2_xl:torch:H100:1:1", (*GPT2, "train.compile=default"), 366.0),
              doc("r1", "gpt2_xl:torch:H100:1:1", ("train.micro_batch_size=4", "train.precision=bf16"), 255.0),
              doc("r1", "gpt2_tiny:torch:cpu:1:1", ("train.micro_batch_size=8", "train.precision=bf16"), 0.0005),
              doc("r1", "gpt2_tiny:torch:cpu:1:1", ("train.micro_batch_size=8",), 0.001),  # fp32: not the source's
              doc("r2", "gpt2_xl:torch:H100:1:8", (*GPT2, "parallel.sharding=stage3", "train.recompute=selective",
                                                   "train.recompute_every=8"), 300.0),
              doc("r2", "llama3.1_70b_1layer:torch:H100:1:8", ("model.seq_len=4096", "train.micro_batch_size=2"), 400.0)])
    table = built(db)
    (pc,) = rows_of(table, "single-pc-gpt2")
    assert pc.hardware == "H100" and table.ratio(pc, H100) == pytest.approx(366 / (400 * mfu.TABLE.factor("gpt2-1.5b")))
    assert ratio_text(table, pc, H100) == f"{366 / (400 * mfu.TABLE.factor('gpt2-1.5b')):.2f}x"
    assert mfu.TABLE.ours_text(H100, pc.ours["h100"]) == "366 TFLOP/s (37.0%)"
    eager_h100, twin = rows_of(table, "single-mp-gpt2")
    assert eager_h100.hardware == "H100" and ratio_text(table, eager_h100, H100) == "- (the source measured batch 8)"
    assert twin.hardware == "cpu" and ratio_text(table, twin, H100).endswith("x (CPU twin, not a comparison)")
    assert mfu.TABLE.ours_text(H100, twin.ours["h100"]).endswith("TFLOP/s (MFU n/a: no peak declared)")
    (sac,) = rows_of(table, "sac-mp-gpt2")
    assert sac.hardware == "H100" and table.ratio(sac, H100) == pytest.approx(300 / (320 * mfu.TABLE.factor("gpt2-1.5b")))
    (ddp,) = rows_of(table, "ddp-mp-proxy")
    assert table.ratio(ddp, H100) == pytest.approx(400 / (600 * mfu.TABLE.factor("llama-3.1-70b-proxy")))
    assert [r.hardware for r in rows_of(table, "fsdp-mp-gpt2")] == [None]  # nothing placed: says why
    assert any(why.startswith("precision fp32") for why in table.left_out)


@pytest.mark.parametrize("sweep", ["mfu_table_h100.yaml", "mfu_table_h100x8.yaml", "mfu_table_tiny.yaml"])
def test_every_point_of_the_shipped_sweeps_is_placed_into_the_cell_it_names(sweep, tmp_path):
    points = expand(load_sweep_file(ROOT / "configs/sweeps" / sweep))
    cells = {c.id: c for c in mfu.TABLE.cells(mfu.TABLE.published())}
    db = tmp_path / "points.db"
    fill(db, [doc(f"p{p.index}", p.case_name, tuple(p.sets), 1.0) for p in points])
    with ResultStore(db) as store:
        for point in points:
            (summary,) = summarize(store.attempts(run_ids=[f"p{point.index}"]))
            placed = mfu.TABLE.place(summary)
            assert placed.key == cells[point.labels["cell"]].key, (point, placed)
            figure = cells[point.labels["cell"]].published["h100"][0]
            assert all(str(summary.facts.get(k)) == str(v) for k, v in figure.expect.items()), point  # comparable
    assert len(points) == {"mfu_table_h100.yaml": 6, "mfu_table_h100x8.yaml": 16, "mfu_table_tiny.yaml": 2}[sweep]


def test_the_proxy_is_one_layer_of_llama_3_1_70b_as_published_and_the_sources_proxy():
    """Llama 3.1 70B's published config.json: hidden_size 8192, num_attention_heads 64, num_key_value_heads 8,
    intermediate_size 28672, vocab_size 128256, rope_theta 500000, rms_norm_eps 1e-5, hidden_act silu, no
    attention or MLP bias, untied embeddings; one layer of it."""
    inputs = load_inputs(ROOT)
    plan = build_run_plan(inputs, ["llama3.1_70b_1layer:torch:H100:1:1"], "mfu", ROOT / "logs-unused", None, ())
    model = plan.cases[0].workload.model
    assert (model.n_layer, model.d_model, model.n_head, model.kv_heads, model.ffn_hidden, model.vocab_size) == \
        (1, 8192, 64, 8, 28672, 128256)
    assert (model.rope_theta, model.norm, model.activation, model.position, model.bias, model.tie_embeddings) == \
        (500000.0, "rmsnorm", "swiglu", "rotary", False, False)
    source = ModelSpec(**mfu.TABLE.published().models["llama-3.1-70b-proxy"])
    assert model.model_copy(update={"seq_len": 4096}) == source  # the table's sweep runs the source's 4096


def test_the_registry_holds_the_four_tables_and_refuses_another_with_the_known_names():
    from run_benchmarks.errors import UserError

    assert list(TABLES) == ["finetune", "flagperf_gpt3", "mfu", "ppo"]
    with pytest.raises(UserError) as refused:
        TABLES.get("mfu2")
    assert "did you mean 'mfu'" in str(refused.value)

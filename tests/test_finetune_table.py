"""``accelbench table finetune`` from a store of synthetic rows (metrics computed by figures/analyze.py from perf
records, workloads planned from the finetune cases), the published column and its ratio, and the finetune
sweep files planned with ``--dry-run``; all in this process."""
from __future__ import annotations

import functools

import pytest

from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.tables import finetune, words
from run_benchmarks.results.tables.core import build
from run_benchmarks.results.tables.render import ratio_text
from training.contract.perflog import EndRecord, StartRecord, StepRecord

from .conftest import ROOT
from .test_results import fill

EFFECTIVE = 3000  # effective tokens of one rank's step: tokens/s per device = EFFECTIVE / step time


@functools.lru_cache(maxsize=None)
def workload(case_name: str, *sets: str) -> dict:
    """The resolved workload a run of ``case_name`` stores (planned, never run)."""
    plan = build_run_plan(load_inputs(ROOT), [case_name], "table", ROOT / "logs-unused", None, sets)
    return plan.cases[0].workload.model_dump(mode="json")


def metrics(step_time: float, world: int) -> dict:
    ranks = []
    for rank in range(world):
        log = collect.RankLog(rank, start=StartRecord(
            rank=rank, local_rank=rank, node_rank=0, world_size=world, framework="torch", framework_version="2",
            device="cpu", precision="fp32", n_params=10, flops_per_token=6e6, flop_formula="6N", tokens_per_step=4096),
            end=EndRecord(rank=rank, steps=6, peak_memory_bytes=2**27, memory_total_bytes=2**34, memory_kind="rss"))
        for step in range(6):
            log.series.add_record(StepRecord(rank=rank, step=step, warmup=step < 2, step_time_s=step_time,
                                             tokens=4096, loss=5.0, effective_tokens=EFFECTIVE))
        ranks.append(log)
    return analyze.round_metrics(ranks, None, "", samples_per_step=4).to_dict()


def doc(run_id: str, case: str, framework: str, world: int, step_time: float | None, round_: int = 1,
        sets: tuple[str, ...] = (), status: str = "ok", hardware: str = "cpu") -> dict:
    """One round's results.json: ``step_time`` None with status oom is a round that ran out of memory."""
    name = f"{case}:{framework}:{hardware}:1:{world}"
    return {
        "run_id": run_id, "case_name": name, "round": round_, "status": status,
        "reason": "" if status == "ok" else "out of memory",
        "case": {"case": case, "framework": framework, "framework_version": "", "hardware": hardware,
                 "vendor": "cpu" if hardware == "cpu" else "nvidia",
                 "nnodes": 1, "nprocs_per_node": world, "world_size": world, "repeat": 1, "extern_config": None,
                 "extern_config_hash": None},
        "metrics": metrics(step_time, world) if status == "ok" else None,
        "workload": workload(name, *sets),
        "environment": {"nodes": [{"node_rank": 0, "host": "h"}]},
        "started_at": f"2026-11-23T10:0{round_}:00+00:00", "ended_at": f"2026-11-23T10:0{round_}:30+00:00",
        "wall_time_s": 30.0, "warnings": [], "error_lines": [],
    }


TP2 = ("parallel.tensor_parallel_degree=2",)
ZERO2 = ("parallel.sharding=stage2", "train.micro_batch_size=2")


@pytest.fixture
def store(tmp_path):
    """Torch LoRA twice (6,000 and 7,500 tok/s: a spread) against Paddle once (12,000); a full finetune on
    2 processes, Paddle MP2 (8,000) against Torch ZeRO-2 out of memory; a second run repeats the Paddle MP2
    workload (10,000), which joins the first; a pretraining run that the table leaves out."""
    db = tmp_path / "results.db"
    fill(db, [doc("run-a", "llama_tiny_lora", "torch", 1, 0.5), doc("run-a", "llama_tiny_lora", "torch", 1, 0.4, 2),
              doc("run-a", "llama_tiny_lora", "paddle", 1, 0.25),
              doc("run-a", "llama_tiny_sft", "paddle", 2, 0.375, sets=TP2),
              doc("run-a", "llama_tiny_sft", "torch", 2, None, sets=ZERO2, status="oom"),
              doc("run-b", "llama_tiny_sft", "paddle", 2, 0.3, sets=TP2),
              doc("run-b", "gpt3_tiny", "torch", 2, 0.5)])
    return db


def ours(store, *run_ids):
    with ResultStore(store) as s:
        return build(finetune.TABLE, summarize(s.attempts(run_ids=run_ids)))


def test_rows_pair_each_framework_per_model_method_gpus_and_batch_with_spread_speedup_and_oom(store):
    built = ours(store)
    published, (lora, sft) = built.rows[:-2], built.rows[-2:]  # the source's rows first, not run
    assert [r.cell.labels for r in published][:1] == [("Bloomz-7b1-mt", "LoRA", "1", "4")]
    assert all(r.hardware is None and not r.ours for r in published)
    assert lora.cell.labels == ("llama_tiny", "LoRA", "1", "4") and not lora.cell.source  # not in the source
    assert sft.cell.labels == ("llama_tiny", "full finetune", "2", "4") and lora.hardware == "cpu"
    paddle_m, torch_m = finetune.TABLE.measures
    torch_stats = lora.ours["torch"].figures[finetune.FIGURE]
    assert (torch_stats.n, torch_stats.mean) == (2, pytest.approx(6750.0, rel=1e-12))
    assert finetune.speedup(lora) == pytest.approx(12000 / 6750, rel=1e-12)
    assert finetune.speedup_text(lora) == "1.78x"
    assert finetune.TABLE.ours_text(torch_m, lora.ours["torch"]) == f"6,750 ±{torch_stats.cv:.1%} n=2"
    assert finetune.TABLE.ours_text(torch_m, sft.ours["torch"]) == "OOM" and finetune.speedup(sft) is None
    assert finetune.speedup_text(sft) == "-" and ratio_text(built, sft, paddle_m) == "-"  # no published figure
    paddle = sft.ours["paddle"].figures[finetune.FIGURE]  # two runs of one workload: one mean over both
    assert (paddle.n, paddle.mean) == (2, pytest.approx(9000.0, rel=1e-12))
    assert words.setup(sft.ours["paddle"]) == "MP2, micro batch 4, fp32"
    assert words.setup(sft.ours["torch"]) == "ZeRO-2 x2, micro batch 2, fp32"
    assert words.setup(lora.ours["paddle"]) == "1 device, micro batch 4, fp32"
    assert built.left_out == {"task pretrain": 1}


def test_a_run_of_a_published_cell_gets_the_published_figure_of_its_setup_and_the_ratio(tmp_path):
    """Llama-7b LoRA on an A100 (2,000 tok/s against the published 1,589.27), its CPU twin (a twin's ratio),
    and the 4-GPU full finetune at batch 8: Torch ZeRO-3 is compared with the source's ZeRO 3 record, a Torch
    run without sharding with nothing (the source measured ZeRO 2 and ZeRO 3)."""
    db = tmp_path / "a100.db"
    batch4 = ("train.micro_batch_size=4",)
    fill(db, [doc("run-a", "llama_7b_lora", "torch", 1, 1.5, sets=batch4, hardware="A100"),
              doc("run-a", "llama_7b_lora", "torch", 1, 1.5, sets=batch4),
              doc("run-a", "llama_7b_sft", "torch", 4, 1.5, sets=("parallel.sharding=stage3", "train.micro_batch_size=2"),
                  hardware="A100"),
              doc("run-b", "llama_7b_sft", "torch", 4, 1.5, sets=("train.micro_batch_size=2",), hardware="A100")])
    built = ours(db)
    _, torch_m = finetune.TABLE.measures
    lora = [r for r in built.rows if r.cell.id == "llama7b-lora-1-4"]
    assert [r.hardware for r in lora] == ["A100", "cpu"]  # the source's hardware first
    assert built.ratio(lora[0], torch_m) == pytest.approx(2000 / 1589.27, rel=1e-12)
    assert ratio_text(built, lora[0], torch_m) == "1.26x"
    assert ratio_text(built, lora[1], torch_m) == "1.26x (CPU twin, not a comparison)"
    zero3, plain = [r for r in built.rows if r.cell.id == "llama7b-finetune-4-8"]
    assert built.choice(zero3, torch_m).figure.printed == "1142.07"
    assert built.ratio(zero3, torch_m) == pytest.approx(2000 / 1142.07, rel=1e-12)
    assert built.ratio(plain, torch_m) is None
    assert ratio_text(built, plain, torch_m) == "- (the source measured ZeRO 2)"


def test_markdown_has_the_reference_shape_with_the_published_columns(accelbench, store):
    done = accelbench("table", "finetune", "run-a", "run-b", "--db", store, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert lines[0] == ("| model | method | devices | batch | ran on | Paddle effective tok/s/dev published | Paddle "
                        "effective tok/s/dev ours | ratio | Torch effective tok/s/dev published | Torch effective "
                        "tok/s/dev ours | ratio | Paddle setup | Torch setup | speedup (Paddle/Torch) | published "
                        "speedup | settings | source |")
    first = lines[2].split(" | ")
    assert first[:7] == ["| Bloomz-7b1-mt", "LoRA", "1", "4", "-", "2293.46", "not run"]
    assert first[-3:] == ["1.32x", "bloom_7b1_lora:paddle:A100:1:1 config_TP1PP1SH0SP1BS4A10080Gx1x1; "
                          "bloom_7b1_lora:torch:A100:1:1 config_TP1PP1SH0SP1BS4A10080Gx1x1", "paddlenlp (A100) |"]
    lora, sft = (line.split(" | ") for line in lines[-2:])
    assert lora[:5] == ["| llama_tiny", "LoRA", "1", "4", "cpu"] and lora[6] == "12,000" and lora[13] == "1.78x"
    assert sft[:4] == ["| llama_tiny", "full finetune", "2", "4"] and sft[9] == "OOM" and sft[13] == "-"
    assert lora[-1] == "not in the source |"
    assert "finetune table: run-a run-b" in done.stdout


def test_terminal_marks_the_oom_row_and_a_selection_without_finetunes_shows_the_source(accelbench, store):
    done = accelbench("table", "finetune", "run-a", "--db", store)
    assert done.returncode == 0, done.stderr
    assert "OOM" in done.stdout and "1.78x" in done.stdout and "speedup" in done.stdout
    none = accelbench("table", "finetune", "case=gpt3_tiny", "--db", store, "--format", "markdown")
    assert none.returncode == 0 and "| 2293.46 | not run |" in none.stdout
    assert "left out: 1 workload(s) of task pretrain" in none.stdout
    unknown = accelbench("table", "finetun", "--db", store)
    assert unknown.returncode == 2 and "finetune" in unknown.stderr and "Traceback" not in unknown.stderr


def test_html_is_one_page_with_the_table_and_a_grouped_bar_chart_per_model(accelbench, store, tmp_path):
    out = tmp_path / "table.html"
    done = accelbench("table", "finetune", "run-a", "--db", store, "--format", "html", "-o", out)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.count("<svg") == 4  # Bloomz, Llama-7b, Llama-13b (published bars), llama_tiny (ours)
    tiny = 'id="finetune3"'
    assert tiny in page and 'id="finetune3-ours-paddle-0"' in page and 'id="finetune3-ours-torch-0"' in page
    assert 'id="finetune3-ours-paddle-1"' in page and 'id="finetune3-ours-torch-1"' not in page  # OOM: no bar
    assert 'id="finetune0-published-paddle-0"' in page  # Bloomz LoRA's published bar
    assert '<td class="oom">OOM</td>' in page and "1.78x" in page


@pytest.mark.parametrize("name, points", [("finetune_table_tiny.yaml", 18), ("finetune_table_a100.yaml", 18)])
def test_the_finetune_sweep_files_plan_every_point(accelbench, tmp_path, name, points):
    done = accelbench("sweep", f"configs/sweeps/{name}", "--dry-run", "--log-root", tmp_path / "logs", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    planned = [line for line in done.stdout.splitlines() if line.startswith("p")]
    assert len(planned) == points and all(line.endswith("-> runs") for line in planned), done.stdout
    assert {"paddle", "torch"} == {line.split()[1].split(":")[1] for line in planned}
    if "tiny" in name:  # the forced out-of-memory row, on both frameworks
        assert sum("debug.memory_limit_mib=1" in line for line in planned) == 2


def test_a_bad_sweep_file_names_the_file_and_the_key(accelbench, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases: [llama_tiny_lora:torch:cpu:1:1]\naxes:\n  row: {values: [1, 2]}\n")
    done = accelbench("sweep", bad, "--dry-run", "--log-root", tmp_path / "logs")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert str(bad) in done.stderr and "key" in done.stderr
    two = accelbench("sweep", bad, "--file", bad, "--dry-run", "--log-root", tmp_path / "logs")
    assert two.returncode != 0 and "two sweep files" in two.stderr


def test_a_sweep_file_table_prints_the_finetune_table_after_the_sweeps_own(accelbench, store, tmp_path):
    from run_benchmarks.sweep.state import Row, SweepOptions, save

    logs = tmp_path / "logs"
    save(logs / "run-a", SweepOptions(points=[], axes=["framework"], table="finetune"),
         [Row(0, {"framework": "torch"}, "llama_tiny_lora:torch:cpu:1:1", "ok")])
    done = accelbench("sweep", "--show", "run-a", "--log-root", logs, "--db", store, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("### sweep points") < done.stdout.index("### finetune table: sweep run-a")
    assert "| 1.78x |" in done.stdout and "| OOM |" in done.stdout


def test_models_keep_the_order_they_ran_in_and_each_gets_its_chart(accelbench, tmp_path):
    db = tmp_path / "two.db"
    fill(db, [doc("run-c", "llama_tiny_sft", "torch", 1, 0.5), doc("run-c", "bloom_tiny_lora", "paddle", 1, 0.5),
              doc("run-c", "bloom_tiny_lora", "torch", 1, 0.5)])
    built = ours(db)
    extra = [r for r in built.rows if not r.cell.source]
    assert [r.cell.labels[:2] for r in extra] == [("llama_tiny", "full finetune"), ("bloom_tiny", "LoRA")]
    paddle_m, _ = finetune.TABLE.measures
    assert "paddle" not in extra[0].ours and finetune.speedup_text(extra[1]) == \
        "1.00x (within noise)"  # one round each, every step alike: the interval of the change is 0
    out = tmp_path / "two.html"
    assert accelbench("table", "finetune", "--db", db, "--format", "html", "-o", out).returncode == 0
    page = out.read_text()
    assert page.count("<svg") == 5 and page.index('id="finetune3"') < page.index('id="finetune4"')

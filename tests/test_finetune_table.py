"""``accelbench table finetune`` from a store of synthetic rows (metrics computed by analyze.py from perf
records, workloads planned from the tiny finetune cases), and the finetune sweep files planned with
``--dry-run``; all in this process."""
from __future__ import annotations

import functools

import pytest

from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results import analyze
from run_benchmarks.results import rank_logs as collect
from run_benchmarks.results.report import finetune_table
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
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
        sets: tuple[str, ...] = (), status: str = "ok") -> dict:
    """One round's results.json: ``step_time`` None with status oom is a round that ran out of memory."""
    name = f"{case}:{framework}:cpu:1:{world}"
    return {
        "run_id": run_id, "case_name": name, "round": round_, "status": status,
        "reason": "" if status == "ok" else "out of memory",
        "case": {"case": case, "framework": framework, "framework_version": "", "hardware": "cpu", "vendor": "cpu",
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


def test_rows_pair_each_framework_per_model_method_gpus_and_batch_with_spread_speedup_and_oom(store):
    with ResultStore(store) as s:
        table, notes = finetune_table.rows(summarize(s.attempts()))
    lora, sft = table
    assert (lora.model, lora.method, lora.devices, lora.batch) == ("llama_tiny", "lora", 1, 4)
    assert (sft.model, sft.method, sft.devices, sft.batch) == ("llama_tiny", "finetune", 2, 4)
    torch_stats = lora.torch.figures[finetune_table.FIGURE]
    assert (torch_stats.n, torch_stats.mean) == (2, pytest.approx(6750.0, rel=1e-12))
    assert lora.speedup() == pytest.approx(12000 / 6750, rel=1e-12)
    assert finetune_table.speedup_text(lora) == "1.78x"
    assert finetune_table.cell(lora.torch) == f"6,750 ±{torch_stats.cv:.1%} n=2"
    assert finetune_table.cell(sft.torch) == "OOM" and sft.speedup() is None
    assert finetune_table.speedup_text(sft) == "-"
    paddle = sft.paddle.figures[finetune_table.FIGURE]  # two runs of one workload: one mean over both
    assert (paddle.n, paddle.mean) == (2, pytest.approx(9000.0, rel=1e-12))
    assert finetune_table.setup(sft.paddle) == "MP2, micro batch 4, fp32"
    assert finetune_table.setup(sft.torch) == "ZeRO-2 x2, micro batch 2, fp32"
    assert finetune_table.setup(lora.paddle) == "1 device, micro batch 4, fp32"
    assert notes == ["left out: 1 workload(s) of task pretrain (the table holds Paddle and Torch LoRA and full "
                     "finetunes)"]


def test_markdown_has_the_reference_shape(accelbench, store):
    done = accelbench("table", "finetune", "run-a", "run-b", "--db", store, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert lines[0] == ("| model | method | CPU processes | batch | Paddle setup | Paddle effective tok/s/dev | Torch setup | "
                        "Torch effective tok/s/dev | speedup (Paddle/Torch) |")
    lora, sft = (line.split(" | ") for line in lines[2:])
    assert lora[:4] == ["| llama_tiny", "LoRA", "1", "4"] and lora[5] == "12,000" and lora[-1] == "1.78x |"
    assert sft[:4] == ["| llama_tiny", "full finetune", "2", "4"] and sft[7] == "OOM" and sft[-1] == "- |"
    assert "finetune table: run-a run-b on cpu" in done.stdout


def test_terminal_marks_the_oom_row_and_a_selection_without_finetunes_is_a_clear_error(accelbench, store):
    done = accelbench("table", "finetune", "run-a", "--db", store)
    assert done.returncode == 0, done.stderr
    assert "OOM" in done.stdout and "1.78x" in done.stdout and "speedup" in done.stdout
    none = accelbench("table", "finetune", "case=gpt3_tiny", "--db", store)
    assert none.returncode != 0 and "no Paddle or Torch LoRA or full finetune" in none.stderr
    assert "Traceback" not in none.stderr


def test_html_is_one_page_with_the_table_and_a_grouped_bar_chart_per_model(accelbench, store, tmp_path):
    out = tmp_path / "table.html"
    done = accelbench("table", "finetune", "run-a", "--db", store, "--format", "html", "-o", out)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.count("<svg") == 1 and 'id="finetune0"' in page  # one model: one chart
    assert 'id="finetune0-paddle-0"' in page and 'id="finetune0-torch-0"' in page  # LoRA: both bars
    assert 'id="finetune0-paddle-1"' in page and 'id="finetune0-torch-1"' not in page  # the OOM side: no bar
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
    with ResultStore(db) as s:
        table, _ = finetune_table.rows(summarize(s.attempts()))
    assert [(r.model, r.method) for r in table] == [("llama_tiny", "finetune"), ("bloom_tiny", "lora")]
    assert finetune_table.cell(table[0].paddle) == "-" and finetune_table.speedup_text(table[1]) == \
        "1.00x (within noise)"  # one round each, every step alike: the interval of the change is 0
    out = tmp_path / "two.html"
    assert accelbench("table", "finetune", "--db", db, "--format", "html", "-o", out).returncode == 0
    page = out.read_text()
    assert page.count("<svg") == 2 and page.index('id="finetune0"') < page.index('id="finetune1"')

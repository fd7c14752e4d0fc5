"""``accelbench table flagperf_gpt3`` and ``table ppo`` from synthetic store rows, in this process: the published
figures (or the grid) with nothing run, runs placed into their cells (FlagPerf's throughput and memory ratios;
PPO's phase figures per GPU count), rows of our own for what the source has not, and the four tables' JSON."""
from __future__ import annotations

import json

import pytest

from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.tables import flagperf_gpt3, ppo
from run_benchmarks.results.tables.core import build
from run_benchmarks.results.tables.render import ratio_text, view

from .test_finetune_table import doc as finetune_doc
from .test_results import fill

GIB = 2 ** 30


def flagperf_doc(case: str, config: str, world: int, step_time: float, memory: int, hardware: str = "A100") -> dict:
    """A Paddle round of ``case`` with the extern config ``config`` (the finetune tests' synthetic metrics:
    4,096 tokens per rank's step)."""
    done = finetune_doc("f1", case, "paddle", world, step_time, hardware=hardware)
    done["case"]["extern_config"] = f"vendors/nvidia/{case}/paddle/{config}.yaml"
    done["metrics"]["peak_memory_bytes"] = {**done["metrics"]["peak_memory_bytes"], "max": memory, "mean": memory}
    return done


def test_flagperf_with_nothing_run_shows_the_guide_and_a_run_gets_both_ratios(accelbench, tmp_path):
    done = accelbench("table", "flagperf_gpt3", "--db", tmp_path / "none.db", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    tokens = [r["measures"]["throughput"]["published"]["values"]["tokens_per_s_per_device"] for r in rows]
    assert tokens == [4410, 4024, 3811, 3791, 1784, 1648, 1518, 1643]
    assert rows[0]["measures"]["memory"]["published"]["printed"] == "66.27 * 8 GB"
    assert rows[3]["measures"]["memory"]["published"]["printed"] == "46.77*2 + 36.59*2 + 30.09*2 + 27.78*2 GB"
    assert rows[0]["settings"] == "gpt3_6.7B:paddle:A100:1:8 config_TP1PP1SH2SP8A10080Gx1x8 --set train.steps=5 " \
                                  "--set train.warmup_steps=2"
    db = tmp_path / "f.db"
    fill(db, [flagperf_doc("gpt3_6.7B", "config_TP1PP1SH2SP8A10080Gx1x8", 8, 1.024, 60 * GIB),
              flagperf_doc("gpt3_tiny", "config_TP1PP1SH1SP2cpux1x2", 2, 0.75, GIB // 4, hardware="cpu")])
    with ResultStore(db) as store:
        built = build(flagperf_gpt3.TABLE, summarize(store.attempts()))
    throughput, memory = flagperf_gpt3.TABLE.measures
    first = built.rows[0]
    assert first.hardware == "A100" and built.ratio(first, throughput) == pytest.approx(4000 / 4410, rel=1e-12)
    assert built.ratio(first, memory) == pytest.approx(60 / 66.27, rel=1e-12)
    assert ratio_text(built, first, throughput) == "0.91x"
    twin = built.rows[-1]
    assert twin.cell.labels == ("gpt3_tiny", "config_TP1PP1SH1SP2cpux1x2") and not twin.cell.source
    assert ratio_text(built, twin, throughput) == "-"  # not one of the guide's rows: no published figure


def ppo_doc(case: str, world: int, sets: tuple[str, ...], experience: float, learning: float) -> dict:
    done = finetune_doc("p1", case, "torch", world, 0.5, sets=sets)
    done["figures"] = [{"name": name, "value": value, "unit": "samples/s", "better": "higher"}
                       for name, value in (("experience.samples_per_s_per_device", experience),
                                           ("learning.samples_per_s_per_device", learning))]
    return done


def test_ppo_is_the_grid_without_published_columns_and_a_run_fills_its_gpu_column(accelbench, tmp_path):
    db = tmp_path / "p.db"
    fill(db, [ppo_doc("ppo_gpt2_s", 1, ("ppo.experience_batch_size=4", "train.micro_batch_size=4"), 12.5, 50.0),
              ppo_doc("ppo_tiny", 2, ("parallel.sharding=stage2",), 3.0, 9.0)])
    with ResultStore(db) as store:
        built = build(ppo.TABLE, summarize(store.attempts()))
    text = view(built)
    assert text.headers == ["model", "strategy", "ran on", "1 GPU", "2 GPUs", "4 GPUs", "8 GPUs", "settings", "source"]
    grid = [r for r in built.rows if r.cell.source]
    assert len(grid) == (9 + 10) * 7 and grid[0].cell.labels == ("GPT2-S", "ddp")
    assert grid[-1].cell.labels == ("OPT-13B LoRA", "gemini + offload (our ZeRO-3)")
    line = text.rows[0]
    assert line[:4] == ["GPT2-S", "ddp", "cpu", "b4: 12.5 / 50"] and line[4] == "-"
    tiny = text.rows[-1]
    assert tiny[:5] == ["ppo_tiny", "zero2", "cpu", "-", "b4: 3 / 9"] and tiny[-1] == "not in the source"
    assert any("our ZeRO-3" in n and "gemini" in n for n in text.notes)
    page = tmp_path / "ppo.html"
    done = accelbench("table", "ppo", "--db", db, "--format", "html", "-o", page)
    assert done.returncode == 0, done.stderr
    assert 'id="ppo0-ours-1-0"' in page.read_text() and "published" not in text.headers[3]


@pytest.mark.parametrize("name", ["mfu", "flagperf_gpt3", "finetune", "ppo"])
def test_each_table_with_nothing_run_prints_in_every_format(accelbench, tmp_path, name):
    for fmt in ("terminal", "markdown", "json"):
        done = accelbench("table", name, "--db", tmp_path / "none.db", "--format", fmt)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["table"] == name


SWEEPS = {"mfu_table_h100.yaml": 6, "mfu_table_h100x8.yaml": 16, "mfu_table_tiny.yaml": 2,
          "flagperf_gpt3_table_a100.yaml": 8, "flagperf_gpt3_table_tiny.yaml": 3, "ppo_table_h100.yaml": 16,
          "ppo_table_h100x8.yaml": 240, "ppo_table_tiny.yaml": 3}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_shipped_table_sweep_plans_every_point_within_its_cases_policy(accelbench, tmp_path, name):
    from .conftest import ROOT

    done = accelbench("sweep", f"configs/sweeps/{name}", "--dry-run", "--log-root", tmp_path / "logs", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    planned = [line for line in done.stdout.splitlines() if line.startswith("p")]
    assert len(planned) == SWEEPS[name] and all(line.endswith("-> runs") for line in planned), done.stdout[-2000:]

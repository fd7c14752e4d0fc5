"""A PPO workload's per-phase summary (report/ppo_phases.py), as ColossalAI's benchmark prints it: experience
making and learning throughput (samples/s, TFLOP/s and MFU per device) and the time split, taken from the
figures the worker stored, in the run's end-of-run table and in ``report`` (terminal and Markdown).
Synthetic stored rows, in-process."""
from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from run_benchmarks.cli.run_view import print_results
from run_benchmarks.results.rounds.record import RoundRecord
from run_benchmarks.results.report.ppo_phases import ppo_phase_view
from run_benchmarks.results.report.summary import number, summarize
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store.schema import Attempt, row_from_document, with_columns

from .test_results import document, fill


def _figure(name: str, value: float, unit: str, formula: str | None = None) -> dict:
    return {"name": name, "value": value, "unit": unit, "better": "lower" if unit == "s" else "higher",
            "params": None, "formula": formula, "ranks": 2}


def ppo_figures(scale: float = 1.0, times: bool = True) -> list[dict]:
    """What phase_figures stores for two ranks (totals summed, per device their mean)."""
    figures = [
        _figure("experience.samples_per_s", 40.0 * scale, "samples/s"),
        _figure("experience.samples_per_s_per_device", 20.0 * scale, "samples/s"),
        _figure("experience.tflops", 6.0 * scale, "TFLOP/s", "PPO formula"),
        _figure("experience.tflops_per_device", 3.0 * scale, "TFLOP/s"),
        _figure("learning.samples_per_s", 80.0 * scale, "samples/s"),
        _figure("learning.samples_per_s_per_device", 40.0 * scale, "samples/s"),
        _figure("learning.tflops", 10.0 * scale, "TFLOP/s", "PPO formula"),
        _figure("learning.tflops_per_device", 5.0 * scale, "TFLOP/s"),
        _figure("iteration.samples_per_s", 25.0 * scale, "samples/s"),
        _figure("iteration.samples_per_s_per_device", 12.5 * scale, "samples/s"),
        _figure("experience.mfu", 0.25 * scale, "fraction", "experience.tflops_per_device / 12 TFLOP/s (datasheet)"),
        _figure("learning.mfu", 0.5 * scale, "fraction"),
    ]  # peak memory: the end record's, as every task's (no peak_memory_gib figure since issue 44)
    if times:
        figures += [_figure("experience.time_s", 12.0 / scale, "s"), _figure("learning.time_s", 6.0 / scale, "s"),
                    _figure("iteration.time_s", 20.0 / scale, "s")]
    return figures


def ppo_document(run_id: str = "run-ppo", round_: int = 1, scale: float = 1.0, times: bool = True) -> dict:
    doc = document(run_id, "ppo_tiny", "torch", 0.5, round_=round_)
    doc["workload"] = {"task": "ppo", "train": {"precision": "fp32"}}
    doc["figures"] = ppo_figures(scale, times)
    return doc


def _summary(*docs: dict):
    (summary,) = summarize([Attempt(with_columns(row_from_document(d))) for d in docs])
    return summary


def test_the_view_shows_each_phase_from_the_stored_figures_and_the_time_split():
    view = ppo_phase_view(_summary(ppo_document()))
    rows = {row[0]: row[1:] for row in view.rows}
    assert view.headers[1:] == ["samples/s", "samples/s per device", "TFLOP/s per device", "MFU",
                                "time per update", "share of iteration"]
    # the times per measured update (4 of them), as the results table's step time is per step
    assert rows["make experience"] == ["40", "20", "3", "25.0%", "3000.0 ms", "60.0%"]
    assert rows["learn"] == ["80", "40", "5", "50.0%", "1500.0 ms", "30.0%"]
    assert any("500.0 ms of an update is neither phase" in n for n in view.notes)
    assert "TFLOP/s: PPO formula" in view.notes
    assert "MFU: experience.tflops_per_device / 12 TFLOP/s (datasheet)" in view.notes


def test_the_whole_iteration_shows_the_rows_own_samples_per_s_as_show_does_and_n_a_where_blank(accelbench, tmp_path):
    """One samples/s in every view: the worker's ``iteration.samples_per_s`` (25 here: each rank's samples over its
    own clock, summed) read 13.46 where show read 13.36; the table now shows the row's own figure, and a blank
    TFLOP/s or MFU cell says n/a as the results table does."""
    doc = ppo_document()
    doc["metrics"]["mfu"] = None  # no peak for the kind: the results table says n/a
    summary = _summary(doc)
    rows = {row[0]: row[1:] for row in ppo_phase_view(summary).rows}
    rate = doc["metrics"]["samples_per_s"]
    assert rows["whole iteration"][:4] == [number(rate), number(rate / 2), number(doc["metrics"]["tflops_per_device"]),
                                           "n/a"]
    assert rows["whole iteration"][4:] == ["5000.0 ms", "100.0%"]
    db = tmp_path / "results.db"
    fill(db, [doc])
    shown = accelbench("show", "run-ppo", "--db", str(db)).stdout
    assert f"samples/s: {number(rate)}" in shown.replace("  ", " "), shown


def test_rounds_are_averaged_and_a_row_without_phase_seconds_says_so():
    two = ppo_phase_view(_summary(ppo_document(round_=1), ppo_document(round_=2, scale=2.0)))
    assert two.rows[0][1] == "60" and "mean over 2 ok round(s)" in two.notes[0]  # (40 + 80) / 2
    old = ppo_phase_view(_summary(ppo_document(times=False)))
    assert [row[5:] for row in old.rows] == [["n/a", "n/a"]] * 3
    assert any("time split: not recorded" in n for n in old.notes)
    pretrain = _summary(document("run-a", "gpt3_tiny", "torch", 0.5))
    assert ppo_phase_view(pretrain) is None  # no PPO figures: no table


def test_report_prints_the_phases_in_the_terminal_and_in_markdown(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [ppo_document(), document("run-ppo", "gpt3_tiny", "torch", 0.5)])
    terminal = accelbench("report", "run-ppo", "--db", str(db))
    assert terminal.returncode == 0, terminal.stderr
    assert "ppo_tiny:torch:cpu:1:2: PPO phases" in terminal.stdout and "gpt3_tiny:torch:cpu:1:2: PPO" not in \
        terminal.stdout
    experience = next(line for line in terminal.stdout.splitlines() if "make experience" in line)
    assert [cell.strip() for cell in experience.split("│")[1:-1]] == ["make experience", "40", "20", "3", "25.0%",
                                                                      "3000.0 ms", "60.0%"]
    markdown = accelbench("report", "run-ppo", "--db", str(db), "--format", "markdown")
    assert "### ppo_tiny:torch:cpu:1:2: PPO phases" in markdown.stdout
    assert "| learn | 80 | 40 | 5 | 50.0% | 1500.0 ms | 30.0% |" in markdown.stdout


def test_the_end_of_a_run_prints_the_phases_under_its_table(tmp_path):
    record = RoundRecord.model_validate(ppo_document())
    result = RoundResult(case_name=record.case_name, round=1, dir=Path(tmp_path / "r" / "round1"), status="ok",
                         figures=record.model_dump()["figures"], record=record)
    console = Console(width=160, record=True, file=io.StringIO())
    print_results(console, [result], [])
    text = console.export_text()
    assert text.index("accelbench results") < text.index("ppo_tiny:torch:cpu:1:2: PPO phases")
    learn = next(line for line in text.splitlines() if "│ learn" in line)
    assert "80" in learn and "30.0%" in learn


def test_the_worker_stores_each_phase_seconds_beside_its_rates():
    """phase_figures (the PPO task's, training/ppo_task.py) on a stand-in worker: the seconds are the clocks the rates divide by."""
    from types import SimpleNamespace

    from training.contract.flops import PhaseFlops
    from training.contract.ppo import PPOSpec
    from training.ppo_task import phase_figures

    phase = {name: PhaseFlops(matmul=900_000_000, attention=100_000_000, reference=900_000_000)
             for name in ("generation", "forwards", "learning")}
    worker = SimpleNamespace(ppo=PPOSpec(), phase=phase, ranks=SimpleNamespace(rank=0), on_cpu=True)
    clocks = {"experience": 12.0, "learning": 6.0, "iteration": 20.0}
    figures = {f.name: f for f in phase_figures(worker, clocks, samples=480)}
    for part, seconds in clocks.items():
        assert (figures[f"{part}.time_s"].value, figures[f"{part}.time_s"].unit) == (seconds, "s")
        assert figures[f"{part}.time_s"].reduce == "mean" and figures[f"{part}.time_s"].better == "lower"
    assert figures["experience.samples_per_s"].value == 480 / clocks["experience"]
    assert figures["iteration.samples_per_s"].value == 480 / clocks["iteration"]


def test_the_html_report_shows_the_phases_after_the_figure_tables(accelbench, tmp_path):
    db, out = tmp_path / "results.db", tmp_path / "report.html"
    fill(db, [ppo_document(), document("run-ppo", "gpt3_tiny", "torch", 0.5)])
    done = accelbench("report", "run-ppo", "--db", str(db), "--format", "html", "--output", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.count("PPO phases") == 1 and "ppo_tiny:torch:cpu:1:2: PPO phases" in page
    assert page.index("<h2>Throughput</h2>") < page.index("PPO phases") < page.index("<h2>Charts</h2>")
    learn = page[page.index("<td class=\"\">learn</td>"):].split("</tr>")[0]
    assert [c.split(">", 1)[1] for c in learn.split("</td>")[:-1]] == ["learn", "80", "40", "5", "50.0%",
                                                                        "1500.0 ms", "30.0%"]
    assert "500.0 ms of an update is neither phase" in page and "TFLOP/s: PPO formula" in page

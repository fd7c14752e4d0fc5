"""The non-compliant mark in every view (report/compliance_marks.py): the run's table, ``show``, ``report``
(terminal, Markdown, HTML), ``compare``, the finetune table and the exports; never a ranking of a departing row
beside compliant ones without saying so. Store rows with the verdicts real plans give; all in this process."""
from __future__ import annotations

import csv
import functools
import io
import json
import re
from pathlib import Path

from rich.console import Console

from run_benchmarks.cli.run_view import print_results
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.rounds.record import RoundRecord
from run_benchmarks.results.tables import finetune
from run_benchmarks.results.tables.core import build
from run_benchmarks.results.tables.render import view
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store.store import ResultStore

from .conftest import ROOT
from .test_finetune_table import doc as finetune_doc
from .test_results import document, fill

TINY = "gpt2_tiny:torch:cpu:1:2"


@functools.lru_cache(maxsize=None)
def planned(case_name: str, *sets: str) -> tuple[dict, dict]:
    """The resolved workload and policy verdict a run of ``case_name`` with ``sets`` records (planned, never run)."""
    case = build_run_plan(load_inputs(ROOT), [case_name], "views", ROOT / "logs-unused", None, sets).cases[0]
    return case.workload.model_dump(mode="json"), case.compliance.model_dump(mode="json")


def judged(run_id: str, sets: tuple[str, ...] = (), step_time: float = 0.5) -> dict:
    found = document(run_id, "gpt2_tiny", "torch", step_time)
    found["workload"], found["compliance"] = planned(TINY, *sets)
    return found


def store(tmp_path: Path) -> Path:
    db = tmp_path / "results.db"
    fill(db, [judged("run-ok"), judged("run-deep", ("model.n_layer=3",), 0.4)])
    return db


def test_show_says_compliant_or_names_each_departure(accelbench, tmp_path):
    db = store(tmp_path)
    ok = accelbench("show", "run-ok", "--db", str(db))
    assert "policy: compliant (cases/policy.yaml)" in ok.stdout
    deep = accelbench("show", "run-deep", "--db", str(db)).stdout
    assert "policy: NON-COMPLIANT with its case's policy" in deep
    assert "departs: model.n_layer 3 (the case's 2; set in --set model.n_layer=3): fixed: the model's shape" in deep
    fill(db, [document("run-old", "gpt2_tiny", "torch", 0.5)])  # a round from before policies
    assert "policy: not judged" in accelbench("show", "run-old", "--db", str(db)).stdout


def test_report_marks_the_departing_row_and_says_the_ranking_mixes_them(accelbench, tmp_path):
    db = store(tmp_path)
    table = accelbench("report", "run-ok", "run-deep", "--db", str(db)).stdout
    rows = [line for line in table.splitlines() if line.startswith("│ gpt2_tiny")]
    assert len(rows) == 2 and "compliant" in rows[0] and "NON-COMPLIANT" in rows[1], table
    assert "not comparable with the compliant rows'" in table and "non-compliant with its case's policy" in table
    alone = accelbench("report", "run-ok", "--db", str(db)).stdout
    assert "policy" not in alone.split("\n", 3)[2] and "compliant" not in alone  # no column where none departs
    md = accelbench("report", "run-ok", "run-deep", "--db", str(db), "--format", "markdown").stdout
    (ranked,) = [line for line in md.splitlines() if line.startswith("| gpt2_tiny | torch") and "+25%" in line]
    assert "(this row non-compliant)" in ranked
    assert "1 ok (non-compliant)" in md and "**rows marked non-compliant" in md
    html = accelbench("report", "run-ok", "run-deep", "--db", str(db), "--format", "html").stdout
    assert html.count('<span class="bad">non-compliant</span>') == 2  # a row in each of the two tables
    assert "not comparable with the compliant rows" in html
    assert "[non-compliant]" in html  # the bars that rank it: their labels say it too


def test_a_speedup_over_a_departing_baseline_says_so(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [judged("run-deep", ("model.n_layer=3",), 0.4), judged("run-ok")])
    md = accelbench("report", "run-deep", "run-ok", "--db", str(db), "--format", "markdown").stdout
    (ranked,) = [line for line in md.splitlines() if line.startswith("| gpt2_tiny | torch") and "-20%" in line]
    assert "(the baseline non-compliant)" in ranked, md


def test_compare_names_the_departing_side_beside_every_change(accelbench, tmp_path):
    db = store(tmp_path)
    out = accelbench("compare", "run-ok", "run-deep", "--db", str(db)).stdout
    changes = [line for line in out.splitlines() if "%" in line and "│" in line
               and not line.split("│")[-2].strip().startswith("[")]  # a change's own line, not its interval's
    assert changes and all("(B non-compliant)" in line for line in changes), out
    # the row label names the departing side (the label may wrap inside its cell: "[differs: ...] [B" / "non-compliant]")
    label = " ".join(cell.strip() for line in out.splitlines() if line.startswith("│")
                     for cell in [line.split("│")[1]] if cell.strip())
    assert "[B non-compliant]" in label and "⚑ B gpt2_tiny:torch:cpu:1:2 -: non-compliant" in out
    md = accelbench("compare", "run-ok", "run-deep", "--db", str(db), "--format", "markdown").stdout
    assert re.search(r"\+25% \[[^]]*\] \(improvement\) \(B non-compliant\)", md), md
    assert "Departing from the case's policy:" in md
    html = tmp_path / "compare.html"
    accelbench("compare", "run-ok", "run-deep", "--db", str(db), "--html", str(html))
    assert "(B non-compliant)" in html.read_text()


def test_exports_carry_compliant_and_each_departure(accelbench, tmp_path):
    db = store(tmp_path)
    raw = list(csv.DictReader(io.StringIO(accelbench("report", "run-ok", "run-deep", "--db", str(db),
                                                     "--format", "csv").stdout)))
    assert [(r["compliant"], r["departures"]) for r in raw] == [("True", ""), ("False", "model.n_layer=3")]
    summary = list(csv.DictReader(io.StringIO(accelbench("report", "run-ok", "run-deep", "--db", str(db),
                                                         "--format", "summary-csv").stdout)))
    assert [r["departures"] for r in summary] == ["", "model.n_layer=3"]
    attempts = json.loads(accelbench("report", "run-deep", "--db", str(db), "--format", "json").stdout)
    assert attempts[0]["compliant"] is False and attempts[0]["record"]["compliance"]["departures"][0]["key"] == \
        "model.n_layer"


def test_the_runs_own_table_marks_it_as_report_does():
    rows = [judged("run-ok"), judged("run-ok", ("model.n_layer=3",), 0.4)]
    results = []
    for i, row in enumerate(rows):
        record = RoundRecord.model_validate({**row, "round": i + 1})
        results.append(RoundResult(row["case_name"], i + 1, Path("/unused") / f"round{i + 1}", "ok", record=record))
    console = Console(file=io.StringIO(), width=200, record=True)
    print_results(console, results, [])
    text = console.export_text()
    assert "NON-COMPLIANT" in text and "not comparable with the compliant rows'" in text
    assert "model.n_layer 3 (the case's 2" in text


def test_the_finetune_table_names_a_departing_framework_beside_its_speedup(tmp_path):
    db = tmp_path / "results.db"
    torch = finetune_doc("run-f", "llama_tiny_lora", "torch", 1, 0.5)
    paddle = finetune_doc("run-f", "llama_tiny_lora", "paddle", 1, 0.4, sets=("train.lora_rank=16",))
    _, paddle["compliance"] = planned("llama_tiny_lora:paddle:cpu:1:1", "train.lora_rank=16")
    _, torch["compliance"] = planned("llama_tiny_lora:torch:cpu:1:1")
    fill(db, [torch, paddle])
    with ResultStore(db, reader=True) as opened:
        built = build(finetune.TABLE, summarize(opened.attempts(run_ids=["run-f"])))
    (row,) = [r for r in built.rows if r.ours]
    paddle_m, torch_m = finetune.TABLE.measures
    assert finetune.speedup_text(row).endswith("(Paddle non-compliant)")
    assert finetune.TABLE.ours_text(paddle_m, row.ours["paddle"]).endswith("(non-compliant)")
    assert "non-compliant" not in finetune.TABLE.ours_text(torch_m, row.ours["torch"])
    assert any("train.lora_rank 16 (the case's 8" in note for note in view(built).notes)

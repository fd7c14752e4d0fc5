"""Reports group rounds by what ran (the workload hash), compare pairs by layout, and exports carry the facts.

Stores are filled the way a run fills them: each round's results document (metrics computed by figures/analyze.py
from perf records, the resolved workload as the worker was handed it) through store_schema.row_from_document.
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics

import pytest

from run_benchmarks.results.checks import references
from run_benchmarks.results.report import export
from run_benchmarks.results.report.compare import NOISE_RULE, Selection, compare, format_change
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.schema import row_from_document
from training.contract.spec import WorkloadSpec

from .conftest import ROOT, write
from .test_results import document as legacy_document, fill, metrics_for

SEQ = 16


def workload(micro: int = 4, precision: str = "bf16", accumulation: int = 1, tp: int = 1, steps: int = 6) -> dict:
    """The resolved workload as outcome.result_document stores it (WorkloadSpec.model_dump)."""
    return WorkloadSpec.model_validate({
        "model": {"n_layer": 2, "n_head": 2, "d_model": 32, "vocab_size": 64, "seq_len": SEQ},
        "train": {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation, "steps": steps,
                  "warmup_steps": 2, "precision": precision},
        "parallel": {"tensor_parallel_degree": tp},
    }).model_dump(mode="json")


def round_doc(run_id: str, step_time: float, round_: int = 1, hardware: str = "cpu", config: str | None = None,
              **spec) -> dict:
    doc = legacy_document(run_id, "gpt2_tiny", "torch", step_time, round_=round_, hardware=hardware, config=config)
    doc["schema"] = "accelbench.results/1"
    doc["workload"] = workload(**spec)
    doc["metrics"] = metrics_for(step_time, tokens=spec.get("micro", 4) * SEQ)
    return doc


def attempts_of(db, **where):
    with ResultStore(db) as store:
        return store.attempts(where)


# ---------------------------------------------------------------- acceptance 1: one workload per row


def test_two_runs_with_different_micro_batches_never_share_a_row(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [round_doc("r1", 0.5, micro=4), round_doc("r1", 0.6, round_=2, micro=4),
              round_doc("r2", 0.9, micro=16)])
    summaries = summarize(attempts_of(db))
    assert len(summaries) == 2
    by_micro = {s.facts["micro_batch_size"]: s for s in summaries}
    assert sorted(by_micro) == [4, 16]
    # each row is the mean of its own rounds only: never a batch size that did not run
    assert by_micro[4].figures["tokens_per_s_per_device"].n == 2
    assert by_micro[4].mean("tokens_per_s_per_device") == pytest.approx(statistics.mean([4 * SEQ / 0.5,
                                                                                          4 * SEQ / 0.6]))
    assert by_micro[16].mean("tokens_per_s_per_device") == pytest.approx(16 * SEQ / 0.9)
    assert by_micro[4].workload_hash != by_micro[16].workload_hash
    assert by_micro[16].facts["global_batch_samples"] == 16 * 2  # micro batch x data parallel 2
    assert by_micro[16].facts["global_batch_tokens"] == 16 * 2 * SEQ

    done = accelbench("report", "r1", "r2", "--db", str(db), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert "micro batch" in done.stdout and "global batch" in done.stdout  # the differing facts are columns
    assert "precision" not in done.stdout.split("\n", 3)[2]  # equal facts are not
    lines = [line for line in done.stdout.splitlines() if "gpt2_tiny" in line and line.startswith("│")]
    assert len(lines) == 2 and any(" 16 " in line for line in lines) and any("2 ok" in line for line in lines)
    flags = [line for line in done.stdout.splitlines() if line.startswith("⚑")]
    assert len(flags) == 1 and "(micro batch 4, global batch 8, global tokens 128)" in flags[0]  # 0.5 s vs 0.6 s


def test_precision_splits_rows_and_rows_without_a_workload_keep_the_case_key(tmp_path):
    db = tmp_path / "results.db"
    old = legacy_document("old", "gpt2_tiny", "torch", 0.5)  # a row from before workloads were stored
    fill(db, [round_doc("r1", 0.5, precision="fp32"), round_doc("r1", 0.4, round_=2, precision="bf16"),
              old, legacy_document("old", "gpt2_tiny", "torch", 0.7, round_=2)])
    summaries = summarize(attempts_of(db))
    assert [(s.workload_hash is None, s.facts.get("precision"), len(s.attempts)) for s in summaries] == [
        (False, "fp32", 1), (False, "bf16", 1), (True, "bf16", 2)]


def test_a_workload_todays_schema_refuses_keeps_its_facts_and_says_why(tmp_path):
    """An old-shaped stored row (a setting no longer known, as a workload from another accelbench holds) is
    never emptied: its rounds still group by what they ran, its stated facts are read as stored, and the row
    says why; before, its facts were {} and two different workloads shared one row by their case name."""
    def old_shaped(run_id: str, step_time: float, micro: int, round_: int = 1) -> dict:
        doc = round_doc(run_id, step_time, round_=round_, micro=micro)
        doc["workload"]["train"]["loss_scale"] = "dynamic"  # a setting today's schema does not know
        return doc

    db = tmp_path / "results.db"
    fill(db, [old_shaped("r1", 0.5, 4), old_shaped("r1", 0.6, 4, round_=2), old_shaped("r2", 0.9, 16)])
    summaries = summarize(attempts_of(db))
    assert [(len(s.attempts), s.facts["micro_batch_size"], s.facts["precision"]) for s in summaries] == [
        (2, 4, "bf16"), (1, 16, "bf16")]
    for s in summaries:
        assert s.workload_hash is not None and "data_parallel" not in s.facts  # derived facts need the schema
        (note,) = [f for f in s.flags if "workload stored by another accelbench" in f]
        assert "train.loss_scale" in note and "read as stored" in note, note


def test_reference_checks_name_the_workload_they_check(tmp_path):
    db = tmp_path / "results.db"
    fill(db, [round_doc("r1", 0.5, micro=4), round_doc("r2", 0.5, micro=16)])
    cases = tmp_path / "cases"
    write(cases / "gpt2_tiny" / "references.yaml",
          "references:\n  - hardware: cpu\n    figures:\n      tokens_per_s_per_device: {value: 128, lower: 0.1}\n")
    checks = references.check_all(summarize(attempts_of(db)), cases, tmp_path / "vendors")
    assert [(c.config, c.measured, c.passed) for c in checks] == [
        ("- (micro batch 4, global batch 8, global tokens 128)", 4 * SEQ / 0.5, True),
        ("- (micro batch 16, global batch 32, global tokens 512)", 16 * SEQ / 0.5, False)]


# ---------------------------------------------------------------- acceptance 2 and 3: compare by layout


def vendors_store(db, b_times=(0.52, 0.54)) -> None:
    docs = [round_doc("a100", t, round_=i, hardware="A100", config="/x/configs/torch/config_A100x1x2.yaml")
            for i, t in enumerate((0.50, 0.55), 1)]
    docs += [round_doc("x1", t, round_=i, hardware="X1", config="/y/vendors/x1/config_X1_layout.yaml")
             for i, t in enumerate(b_times, 1)]
    docs.append(round_doc("x1", 0.3, round_=3, hardware="X1", micro=8))  # a layout A100 never ran
    fill(db, docs)


def sides(db):
    a = Selection("hardware=A100", (), {"hardware": "A100"})
    b = Selection("hardware=X1", (), {"hardware": "X1"})
    return a, b, compare(a, b, attempts_of(db, hardware="A100"), attempts_of(db, hardware="X1"))


def test_two_vendors_identical_layouts_with_different_config_names_pair_up(tmp_path):
    db = tmp_path / "results.db"
    vendors_store(db)
    _, _, rows = sides(db)
    paired = [r for r in rows if r.a and r.b]
    assert len(paired) == 1 and len(rows) == 2
    (row,) = paired
    assert (row.a.facts["micro_batch_size"], row.b.facts["micro_batch_size"]) == (4, 4)
    assert row.key["hardware"] == "A100/X1" and "config_A100x1x2/config_X1_layout" in row.label
    a_tok, b_tok = [4 * SEQ / t for t in (0.50, 0.55)], [4 * SEQ / t for t in (0.52, 0.54)]
    expected = statistics.mean(b_tok) / statistics.mean(a_tok) - 1
    assert row.change("tokens_per_s_per_device") == pytest.approx(expected)
    lonely = next(r for r in rows if not (r.a and r.b))
    assert lonely.a is None and lonely.b.facts["micro_batch_size"] == 8 and "micro batch 8" in lonely.label


def _cv(values):
    return statistics.stdev(values) / statistics.mean(values)


def _log_se(values):
    """Between rounds (these rows store no steps to resample): sd(log figure) / sqrt(k), results/figures/noise.py."""
    return statistics.stdev(math.log(v) for v in values) / math.sqrt(len(values))


def test_a_difference_inside_the_noise_is_marked(tmp_path, accelbench):
    db = tmp_path / "results.db"
    vendors_store(db)
    _, _, rows = sides(db)
    row = next(r for r in rows if r.a and r.b)
    a_tok, b_tok = [4 * SEQ / t for t in (0.50, 0.55)], [4 * SEQ / t for t in (0.52, 0.54)]
    centre = math.log(statistics.mean(b_tok) / statistics.mean(a_tok))
    half = 1.959964 * math.hypot(_log_se(a_tok), _log_se(b_tok))
    low, high = row.interval("tokens_per_s_per_device")
    assert (low, high) == pytest.approx((math.exp(centre - half) - 1, math.exp(centre + half) - 1))
    assert low < 0 < high and row.within_noise("tokens_per_s_per_device") is True
    assert format_change(row, "tokens_per_s_per_device").endswith("(within noise)")

    done = accelbench("compare", "hardware=A100", "hardware=X1", "--db", str(db), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert "(within noise)" in done.stdout and NOISE_RULE in done.stdout
    assert "2 ok" in done.stdout and f"±{_cv(a_tok):.1%}" in done.stdout and f"±{_cv(b_tok):.1%}" in done.stdout


def test_a_difference_beyond_the_noise_is_not_marked(tmp_path):
    db = tmp_path / "results.db"
    vendors_store(db, b_times=(0.25, 0.26))  # twice as fast, well beyond a few percent of spread
    _, _, rows = sides(db)
    row = next(r for r in rows if r.a and r.b)
    assert row.within_noise("tokens_per_s_per_device") is False
    assert format_change(row, "tokens_per_s_per_device").endswith("(improvement)")  # B is faster
    assert row.verdict("step_time_median_s") == "improvement"  # shorter steps: better, by the figure's direction
    single = next(r for r in rows if not (r.a and r.b))
    assert single.within_noise("tokens_per_s_per_device") is None  # one side missing: nothing to mark


# ---------------------------------------------------------------- exports


def test_summary_exports_carry_layout_columns_and_paths_relative_to_the_checkout(tmp_path, accelbench):
    db = tmp_path / "results.db"
    inside = str(ROOT / "configs" / "torch" / "config_x.yaml")
    fill(db, [round_doc("r1", 0.5, micro=4, tp=2, config=inside),
              round_doc("r1", 0.5, round_=2, micro=4, tp=2, config=inside),
              round_doc("r2", 0.8, micro=16, config="/elsewhere/vendor/config_y.yaml")])
    done = accelbench("report", "r1", "r2", "--db", str(db), "--format", "summary-csv", "--root", str(ROOT))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [(r["micro_batch_size"], r["tensor_parallel"], r["data_parallel"], r["rounds_ok"]) for r in rows] == [
        ("4", "2", "1", "2"), ("16", "1", "2", "1")]
    assert [r["extern_config"] for r in rows] == ["configs/torch/config_x.yaml", "config_y.yaml"]
    assert float(rows[1]["tokens_per_s_per_device"]) == pytest.approx(16 * SEQ / 0.8)
    assert rows[0]["tokens_per_s_per_device_cv"] == "0.0" and rows[1]["tokens_per_s_per_device_cv"] == ""

    done = accelbench("report", "r1", "--db", str(db), "--format", "json", "--root", str(ROOT))
    raw = json.loads(done.stdout)
    assert {r["extern_config"] for r in raw} == {"configs/torch/config_x.yaml"}
    assert {(r["micro_batch_size"], r["tensor_parallel"]) for r in raw} == {(4, 2)}
    assert len({r["workload_hash"] for r in raw}) == 1 and all(r["workload_hash"] for r in raw)
    assert export.relative(None, ROOT) is None


# ---------------------------------------------------------------- issue 30: compare what differs in one setting


def test_compare_two_runs_differing_in_micro_batch_pairs_them_and_names_the_setting(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [round_doc("m4", 0.5, micro=4), round_doc("m8", 0.8, micro=8)])
    runs = accelbench("compare", "m4", "m8", "--db", str(db), "--format", "markdown")
    assert runs.returncode == 0, runs.stderr
    (row,) = [line for line in runs.stdout.splitlines() if line.startswith("| gpt2_tiny")]  # one row, not two
    assert "(no run)" not in row and "[differs: train.micro_batch_size 4/8]" in row
    cells = [c.strip() for c in row.strip("|").split("|")]
    # 4 x 16 / 0.5 against 8 x 16 / 0.8, one round each: every step took as long, so its interval is the change
    assert cells[1:4] == ["128", "160", "+25% [+25%, +25%] (improvement)"]
    facts = accelbench("compare", "micro_batch_size=4", "micro_batch_size=8", "--db", str(db), "--format", "markdown")
    assert facts.returncode == 0, facts.stderr  # was refused: "cannot select by 'micro_batch_size'"
    (row,) = [line for line in facts.stdout.splitlines() if line.startswith("| gpt2_tiny")]
    assert "(no run)" not in row and "train.micro_batch_size 4/8" in row


def test_compare_with_nothing_in_common_says_so_once_with_the_closest_pairs(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [round_doc("a", 0.5, hardware="A100", micro=m, precision=p) for m in (1, 2, 4) for p in ("bf16", "fp32")]
         + [round_doc("b", 0.5, hardware="X1", micro=m, accumulation=2, precision="fp16") for m in (1, 2, 4)])
    done = accelbench("compare", "hardware=A100", "hardware=X1", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("nothing in common") == 1 and "(no run)" not in done.stdout
    closest = [line for line in done.stdout.splitlines() if "setting(s) differ" in line]
    assert len(closest) == 3 and all("train.gradient_accumulation_steps" in line for line in closest)


def test_rows_differing_only_in_a_setting_outside_the_layout_get_a_column_for_it(tmp_path, accelbench):
    db = tmp_path / "results.db"
    fill(db, [round_doc("s", 0.5, steps=15), round_doc("s", 0.8, round_=2, steps=12)])
    done = accelbench("report", "s", "--db", str(db), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "case" in line and "rounds" in line)
    assert "train.steps" in header  # was two identical-looking rows
    rows = [line for line in done.stdout.splitlines() if "gpt2_tiny" in line and line.startswith("│")]
    assert len(rows) == 2 and any(" 15 " in r for r in rows) and any(" 12 " in r for r in rows)
    assert "train.micro_batch_size" not in done.stdout  # a fact's own setting is never a second column
    markdown = accelbench("report", "s", "--db", str(db), "--format", "markdown").stdout
    header = next(line for line in markdown.splitlines() if line.startswith("| case | config |"))
    assert header.startswith("| case | config | train.steps | rounds |")  # Markdown rows looked alike too
    assert sorted(line.split(" | ")[2] for line in markdown.splitlines() if line.startswith("| gpt2_tiny:")) == [
        "12", "15"]
    out = tmp_path / "r.html"
    assert accelbench("report", "s", "--db", str(db), "--format", "html", "-o", str(out)).returncode == 0
    page = out.read_text()
    assert "train.steps 15" in page and "train.steps 12" in page  # chart labels and legends tell them apart

"""Loss-curve references (issue 34): recording from stored runs, the band check, refusals, the file format.

In-process: rows made as a run makes them (figures/analyze.py's metrics from step records, whose losses follow a
synthetic curve per data seed), written through the store; the CLI through the ``accelbench`` fixture.
"""
from __future__ import annotations

import math
import random

import pytest

from run_benchmarks.results.checks import loss_check, loss_reference
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.checks.loss_reference import Band, RunCurve
from run_benchmarks.results.store.schema import Attempt
from training.contract.perflog import EndRecord, StartRecord, StepRecord
from training.contract.spec import WorkloadSpec

from .test_results import fill

STEPS, CASE = 30, "gpt2_tiny"


def curve(seed: int, scale: float = 1.0, noise: float = 0.02, flat: bool = False) -> list[float]:
    """A loss that falls from ln(1024) towards 1.4 (``scale`` speeds the fall, like a larger learning rate),
    with per-seed noise of ``noise`` nats a step."""
    rng = random.Random(seed)
    start, floor = math.log(1024), 1.4
    return [start if flat else floor + (start - floor) * math.exp(-scale * s / 12) + rng.gauss(0, noise)
            for s in range(STEPS)]


def spec(data_seed: int, **train) -> dict:
    return WorkloadSpec.model_validate({
        "model": {"family": "gpt2", "n_layer": 2, "n_head": 4, "d_model": 128, "vocab_size": 1024, "seq_len": 128},
        "train": {"micro_batch_size": 8, "steps": STEPS, "warmup_steps": 5, **train},
        "data": {"seed": data_seed}}).model_dump(mode="json")


def metrics(losses: list[float]) -> dict:
    log = collect.RankLog(0, start=StartRecord(
        rank=0, local_rank=0, node_rank=0, world_size=1, framework="torch", framework_version="2.13.0",
        device="cpu", precision="fp32", n_params=10, flops_per_token=6e6, flop_formula="6N", tokens_per_step=1024),
        end=EndRecord(rank=0, steps=STEPS, peak_memory_bytes=2**20, memory_total_bytes=2**34, memory_kind="rss"))
    for step, loss in enumerate(losses):
        log.series.add_record(StepRecord(rank=0, step=step, warmup=step < 5, step_time_s=0.1, tokens=1024, loss=loss))
    return analyze.round_metrics([log], None, "").to_dict()


def document(run_id: str, losses: list[float], workload: dict, world: int = 1, framework: str = "torch") -> dict:
    return {
        "run_id": run_id, "case_name": f"{CASE}:{framework}:cpu:1:{world}", "round": 1, "status": "ok",
        "case": {"case": CASE, "framework": framework, "framework_version": "2.13", "hardware": "cpu",
                 "vendor": "cpu", "nnodes": 1, "nprocs_per_node": world, "world_size": world, "repeat": 1},
        "metrics": metrics(losses), "workload": workload,
        "environment": {"orchestrator": {}, "nodes": []}, "warnings": [], "error_lines": [],
    }


def as_attempt(doc: dict) -> Attempt:
    from run_benchmarks.results.store.schema import row_from_document

    return Attempt(row_from_document(doc))


def reference_curve(seeds=(1, 2, 3)) -> loss_reference.Curve:
    return loss_reference.record([RunCurve(as_attempt(document(f"ref{s}", curve(s), spec(s)))) for s in seeds])


def test_every_step_loss_is_kept_in_the_round_metrics():
    losses = curve(1)
    assert metrics(losses)["loss_series"] == [[s, pytest.approx(v)] for s, v in enumerate(losses)]


def test_the_band_is_k_times_the_seed_spread_with_a_relative_floor():
    band = Band(first_step=15, k=3, floor=0.005)
    assert band.half_width(2.0, 0.1) == pytest.approx(0.3)
    assert band.half_width(2.0, 0.0) == pytest.approx(0.03)  # a zero-noise reference is no bit-equality test


@pytest.mark.parametrize("losses, passes, says", [
    (curve(4), True, "0 of"),  # another data seed: inside
    ([v * 1.004 for v in curve(5)], True, "ok: mean relative error"),  # a small perturbation: inside
    (curve(6, scale=4.0), False, "first outside: 15"),  # lr x10-like: falls too fast
    (curve(7, flat=True), False, "FAIL: loss fell 0 from"),  # a loss that does not move
])
def test_runs_against_the_band(losses, passes, says):
    ref = loss_reference.LossReferenceFile(curves=[reference_curve()])
    verdict = loss_check.check_run(RunCurve(as_attempt(document("run", losses, spec(9)))), ref, "file")
    assert verdict.passed is passes, verdict.reasons()
    assert any(says in line for line in verdict.reasons()), verdict.reasons()
    assert [s.step for s in verdict.steps] == list(range(15, STEPS))  # from min(21, 30 // 2)


def test_a_flat_loss_fails_even_against_its_relative_error():
    flat_ref = loss_reference.Curve.model_validate({**reference_curve().model_dump(), "mean": [6.9] * STEPS,
                                                    "std": [0.0] * STEPS})
    ref = loss_reference.LossReferenceFile(curves=[flat_ref])
    verdict = loss_check.check_run(RunCurve(as_attempt(document("run", curve(7, flat=True), spec(9)))), ref, "f")
    assert verdict.mean_rel_error < 0.01 and not verdict.passed  # relative error alone would pass it


def test_another_layout_precision_or_framework_is_checked_and_listed():
    ref = loss_reference.LossReferenceFile(curves=[reference_curve()])
    other = document("run", curve(4), spec(9, precision="bf16", micro_batch_size=4), world=2, framework="paddle")
    verdict = loss_check.check_run(RunCurve(as_attempt(other)), ref, "f")
    assert verdict.passed
    listed = "; ".join(verdict.differing)
    assert "train.precision: 'fp32' vs 'bf16'" in listed and "nprocs_per_node: 1 vs 2" in listed
    assert "framework: 'torch' vs 'paddle'" in listed and "data.seed" not in listed


def test_a_run_of_other_tokens_per_step_or_model_is_refused_with_what_differs():
    ref = loss_reference.LossReferenceFile(curves=[reference_curve()])
    bigger = spec(9, micro_batch_size=16)
    verdict = loss_check.check_run(RunCurve(as_attempt(document("run", curve(4), bigger))), ref, "f")
    assert not verdict.passed and "tokens_per_step: 1024 vs 2048" in verdict.refused
    deeper = spec(9)
    deeper["model"]["n_layer"] = 4
    verdict = loss_check.check_run(RunCurve(as_attempt(document("run", curve(4), deeper))), ref, "f")
    assert "model.n_layer: 2 vs 4" in verdict.refused


def test_recording_refuses_too_few_runs_repeated_seeds_and_runs_that_differ():
    runs = [RunCurve(as_attempt(document(f"r{s}", curve(s), spec(s)))) for s in (1, 2)]
    with pytest.raises(ValueError, match="at least 3"):
        loss_reference.record(runs)
    with pytest.raises(ValueError, match="repeat"):
        loss_reference.record(runs + [RunCurve(as_attempt(document("r3", curve(3), spec(2))))])
    with pytest.raises(ValueError, match="train.lr"):
        loss_reference.record(runs + [RunCurve(as_attempt(document("r3", curve(3), spec(3, lr=1e-3))))])
    flat = [RunCurve(as_attempt(document(f"f{s}", curve(s, flat=True), spec(s)))) for s in (1, 2, 3)]
    with pytest.raises(ValueError, match="does not move"):
        loss_reference.record(flat)


def test_the_file_round_trips():
    ref = loss_reference.LossReferenceFile(curves=[reference_curve()])
    import yaml

    again = loss_reference.LossReferenceFile.model_validate(yaml.safe_load(loss_reference.dump_yaml(ref)))
    assert again == ref and again.schema_ == "accelbench.loss_reference/1"
    assert again.curves[0].recorded.data_seeds == [1, 2, 3]


def test_record_then_check_through_the_cli(accelbench, tmp_path, root):
    db = tmp_path / "results.db"
    fill(db, [document(f"seed{s}", curve(s), spec(s)) for s in (1, 2, 3)]
         + [document("good", curve(4), spec(4, micro_batch_size=4), world=2), document("lr10", curve(5, scale=4.0), spec(5)),
            document("other", curve(6), spec(6, micro_batch_size=4))])
    store = ["--db", str(db), "--root", str(root)]
    path = root / "cases" / CASE / "loss_reference.yaml"
    shipped = path.read_text()  # the case's own curve (2048 tokens a step): kept beside the new one
    dry = accelbench("reference", "record", "seed1", "seed2", "seed3", "--dry-run", *store)
    assert dry.returncode == 0 and "not written" in dry.stdout and path.read_text() == shipped, dry.stdout + dry.stderr
    few = accelbench("reference", "record", "seed1", "seed2", *store)
    assert few.returncode == 2 and "at least 3" in few.stderr and "Traceback" not in few.stderr
    made = accelbench("reference", "record", "seed1", "seed2", "seed3", *store)
    assert made.returncode == 0, made.stdout + made.stderr
    assert [c.comparable["tokens_per_step"] for c in loss_reference.load(root / "cases", CASE).curves] == [2048, 1024]
    good = accelbench("report", "good", "--check", "--no-reference-expected", *store)
    assert good.returncode == 0 and ": pass" in good.stdout, good.stdout
    assert "nprocs_per_node: 1 vs 2" in good.stdout
    bad = accelbench("report", "lr10", "--check", *store)
    assert bad.returncode == 6 and "FAIL (the loss curve left" in bad.stdout and "first outside: 15" in bad.stdout
    other = accelbench("report", "other", "--check", *store)
    assert other.returncode == 5 and "not comparable" in other.stdout and "vs 512" in other.stdout
    page = tmp_path / "report.html"
    html = accelbench("report", "lr10", "--check", "--format", "html", "-o", str(page), *store)
    assert html.returncode == 6, html.stdout + html.stderr
    text = page.read_text()
    assert "Is it the same model?" in text and "loss against the reference band" in text and "first outside: 15" in text


def test_a_wrong_reference_file_is_named_with_its_key(tmp_path):
    from run_benchmarks.errors import UserError

    (tmp_path / CASE).mkdir()
    (tmp_path / CASE / "loss_reference.yaml").write_text("schema: accelbench.loss_reference/1\ncurves:\n  - {steps: [0]}\n")
    with pytest.raises(UserError) as caught:
        loss_reference.load(tmp_path, CASE)
    assert "loss_reference.yaml" in str(caught.value) and "curves" in str(caught.value)
    (tmp_path / CASE / "loss_reference.yaml").write_text("schema: accelbench.loss_reference/2\n")
    with pytest.raises(UserError, match="schema"):
        loss_reference.load(tmp_path, CASE)


def test_a_workload_stored_before_the_markov_default_reads_as_uniform_and_never_joins_a_markov_row():
    """Rounds store the full workload, so one without data.synthetic was stored when synthetic meant uniform:
    the named migration says so, and its hash differs from today's default's."""
    from run_benchmarks.results.report.facts import round_facts

    today = spec(1)
    before = {**today, "data": {k: v for k, v in today["data"].items() if k != "synthetic"}}
    old, new = (round_facts(as_attempt(document(r, curve(1), w))) for r, w in (("old", before), ("new", today)))
    assert today["data"]["synthetic"] == "markov"
    assert old.spec["data"]["synthetic"] == "uniform" and "synthetic" not in new.spec["data"]
    assert old.workload_hash != new.workload_hash


def test_a_stored_rows_case_that_is_not_a_plain_name_never_becomes_a_path(accelbench, tmp_path, root):
    # rows arrive in bundles from elsewhere: case "../../x" would write <root>/../x/loss_reference.yaml
    docs = [document(f"evil{s}", curve(s), spec(s)) for s in (1, 2, 3)]
    for doc in docs:
        doc["case"]["case"] = "../../x"
    db = tmp_path / "results.db"
    fill(db, docs)
    store = ["--db", str(db), "--root", str(root)]
    made = accelbench("reference", "record", "evil1", "evil2", "evil3", *store)
    assert made.returncode == 2 and "Traceback" not in made.stderr, made.stdout + made.stderr
    said = " ".join(made.stderr.split())
    assert "'../../x' cannot be a file name" in said and "evil1" in said and "leave that run out" in said
    assert not (root.parent / "x").exists() and not (root / "x").exists()
    checked = accelbench("report", "evil1", "--check", *store)
    assert checked.returncode == 2 and "'../../x' cannot be a file name" in " ".join(checked.stderr.split())
    from run_benchmarks.errors import UserError
    from run_benchmarks.results.checks import references

    with pytest.raises(UserError, match="row r1: its case"):
        loss_reference.load(root / "cases", "../../x", "row r1")
    with pytest.raises(UserError, match="its vendor"):
        references.load_references(root / "cases", root / "vendors", CASE, "../v", "row r1")

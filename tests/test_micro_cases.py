"""Micro-benchmark cases (task micro) through the real CLI: the launcher starts the worker as for training,
the figures land in results.json and the store, and ``accelbench show`` prints them as tables. The formulas
are written out here again, not imported, so a wrong one cannot pass itself."""
from __future__ import annotations

import json

import pytest

from run_benchmarks.catalog.casename import parse as parse_case
from run_benchmarks.catalog.config_files import CaseFile
from training.contract.spec import WorkloadSpec

from .goldens import MICRO_SIZES

pytest.importorskip("torch")

SIZES = MICRO_SIZES  # what the micro golden (tests/goldens.py) asks of its collective cases


def case_round(golden, name: str) -> tuple[dict, dict]:
    """The round of ``name`` in the session's micro golden; its results.json and its store row, checked to hold
    the same figures."""
    document = golden.doc(name)
    (row,) = [r for r in golden.attempts() if r["results_path"] == document["results_path"]]
    assert document["status"] == row["status"] == "ok", document["reason"]
    assert document["metrics"] is None and document["steps_completed"] == 0  # figures, not training steps
    assert row["figures"] == document["figures"]
    return document, row


def by_params(figures: list[dict], name: str) -> dict[str, dict]:
    return {json.dumps(f["params"], sort_keys=True): f for f in figures if f["name"] == name}


def assert_gemm_is_2mnk_over_time(figures: list[dict]) -> dict:
    """TINY_GEMM's fp32 shapes, each TFLOP/s figure exactly 2*M*N*K over its time; the best is their maximum.
    Returns the best-of record."""
    times, tflops = by_params(figures, "gemm.time_s"), by_params(figures, "gemm.tflops")
    assert sorted((p["m"], p["n"], p["k"]) for p in (json.loads(k) for k in tflops)) == [(32, 48, 16), (64, 64, 64)]
    assert times.keys() == tflops.keys()
    for key, t in times.items():
        p = t["params"]
        assert p["dtype"] == "fp32" and t["unit"] == "s" and t["value"] > 0
        # FLOPs = TFLOP/s x time x 1e12 = 2*M*N*K exactly (up to the float rounding of the two divisions)
        assert tflops[key]["value"] * t["value"] * 1e12 == pytest.approx(2 * p["m"] * p["n"] * p["k"], rel=1e-12)
        assert tflops[key]["ranks"] == 1 and tflops[key]["unit"] == "TFLOP/s" and "2*M*N*K" in tflops[key]["formula"]
    (best,) = [f for f in figures if f["name"] == "gemm.best_tflops"]
    assert best["value"] == max(f["value"] for f in tflops.values())
    return best


def test_gemm_case_reports_tflops_of_exactly_2mnk_flops(golden_micro):
    document, _ = case_round(golden_micro, "gemm:torch:cpu:1:1")
    assert_gemm_is_2mnk_over_time(document["figures"])


@pytest.mark.parametrize("golden,case,factor", [("golden_two_nodes", "allreduce:torch:cpu:2:1", 2 * (2 - 1) / 2),
                                               ("golden_micro", "allgather:torch:cpu:1:2", (2 - 1) / 2)])
def test_collective_case_follows_nccl_tests_formulas(golden_micro, golden_two_nodes, golden, case, factor):
    """Through the CLI, the all-reduce on two hosts and the all-gather on one: each rank's figures aggregated
    into results.json and the store. Every op's formula at 2 and 4 ranks (sendrecv's busBw = algBw, the
    all-reduce's 2(n-1)/n at 4) is test_microbench's, on the worker's own figures; that those cases plan into
    the worker's spec is test_every_collective_case_plans_its_op_for_the_worker."""
    op, nprocs = case.split(":")[0], parse_case(case).world_size
    document, row = case_round({"golden_micro": golden_micro, "golden_two_nodes": golden_two_nodes}[golden], case)
    assert row["world_size"] == nprocs
    figures = document["figures"]
    times = by_params(figures, f"{op}.time_s")
    algbw, busbw = by_params(figures, f"{op}.algbw_gbps"), by_params(figures, f"{op}.busbw_gbps")
    # every size the case asked for, rounded down to whole fp32 elements per rank
    assert sorted(json.loads(k)["bytes"] for k in times) == [s // 4 // nprocs * nprocs * 4 for s in SIZES]
    assert times.keys() == algbw.keys() == busbw.keys()
    for key, t in times.items():
        p = t["params"]
        assert p["op"] == op and p["ranks"] == nprocs and t["ranks"] == nprocs  # every rank reported it
        assert algbw[key]["value"] == pytest.approx(p["bytes"] / t["value"] / 1e9, rel=1e-12)
        assert busbw[key]["value"] == pytest.approx(algbw[key]["value"] * factor, rel=1e-12)


@pytest.mark.parametrize("case", ["allreduce:torch:cpu:1:4", "sendrecv:torch:cpu:1:2", "allgather:torch:cpu:1:2"])
def test_every_collective_case_plans_its_op_for_the_worker(root, tmp_path, case):
    """The collective cases the CLI no longer runs here (the all-reduce at 4 ranks, sendrecv) give the worker
    the spec test_microbench measures: their op, the sizes asked for, one process per rank."""
    from .test_plan import build

    (planned,) = build(root, tmp_path, case, assignments=(f"micro.sizes_bytes={json.dumps(SIZES)}",)).cases
    (rnd,) = planned.rounds
    micro = rnd.worker_config.workload.micro
    assert (micro.bench, micro.op, list(micro.sizes_bytes)) == ("collective", case.split(":")[0], SIZES)
    (node,) = rnd.nodes
    assert f"--nproc-per-node={case.rsplit(':', 1)[1]}" in node.argv  # one process per rank, as the worker's test


def test_membw_case_counts_bytes_as_stream_does(golden_micro):
    nbytes = 1 << 20
    document, _ = case_round(golden_micro, "membw:torch:cpu:1:1")
    values = {f["name"]: f["value"] for f in document["figures"]}
    for kernel, arrays in (("copy", 2), ("triad", 3)):
        assert values[f"membw.{kernel}_gbps"] == pytest.approx(
            arrays * nbytes / values[f"membw.{kernel}_time_s"] / 1e9, rel=1e-12)


def test_show_prints_micro_figures_as_tables(golden_micro, accelbench, tmp_path):
    result = golden_micro.result
    show = accelbench("show", "last", "--db", str(golden_micro.db))
    assert show.returncode == 0, show.stderr
    assert "allgather: bandwidth against message size (2 ranks)" in show.stdout
    assert "busbw (GB/s)" in show.stdout and "busbw = algbw x (n-1)/n, n = 2" in show.stdout
    document = golden_micro.doc("allgather:torch:cpu:1:2")
    (busbw,) = [f for f in document["figures"] if f["name"] == "allgather.busbw_gbps" and f["params"]["bytes"] == 1024]
    section = show.stdout[show.stdout.index("allgather: bandwidth against message size (2 ranks)"):]
    row = next(line for line in section.splitlines() if line.strip("│ ").startswith("1024 "))
    assert f"{busbw['value']:,.4g}" in row
    assert "allgather: bandwidth against message size" in result.stdout  # the end-of-run tables too
    page = tmp_path / "report.html"
    html = accelbench("report", "last", "--db", str(golden_micro.db), "--format", "html", "-o", str(page))
    assert html.returncode == 0, html.stderr
    svg = page.read_text()
    assert 'id="busbw-allgather"' in svg and "allgather: bus bandwidth against message size" in svg
    assert "global batch" not in svg  # a micro case has no batch: its placeholder train section is not a fact


def test_a_micro_case_trains_no_model():
    with pytest.raises(ValueError, match="task micro trains no model: remove model"):
        WorkloadSpec.model_validate({"task": "micro", "micro": {"bench": "gemm"},
                                     "model": {"n_layer": 2, "n_head": 2, "d_model": 8, "vocab_size": 8,
                                               "seq_len": 8}})
    with pytest.raises(ValueError, match="task micro needs a micro section"):
        WorkloadSpec.model_validate({"task": "micro"})
    with pytest.raises(ValueError, match="a case needs micro"):
        CaseFile.model_validate({"task": "micro", "frameworks": ["torch"]})
    spec = WorkloadSpec.model_validate({"task": "micro", "micro": {"bench": "collective", "op": "broadcast"}})
    assert WorkloadSpec.model_validate(spec.model_dump(mode="json")) == spec  # the worker reads it back


def test_a_typo_in_the_micro_section_fails_at_plan_time(accelbench):
    result = accelbench("run", "gemm:torch:cpu:1:1", "--set", "micro.shapez=[[8,8,8]]")
    assert result.returncode != 0 and "shapez" in result.stdout + result.stderr
    assert not (result.log_root / "results.db").exists() or not result.attempts()


def test_a_two_node_training_run_shows_the_allreduce_busbw_measured_on_its_hosts(golden_two_nodes, accelbench):
    # Two "hosts" that are both this machine (tests/goldens.py): the all-reduce case measured them, the training
    # run on the same two nodes then shows that measurement beside its own figures.
    show = accelbench("show", "last", "--db", str(golden_two_nodes.db))
    assert show.returncode == 0, show.stderr
    (allreduce,) = [r for r in golden_two_nodes.attempts() if r["case"] == "allreduce"]
    (largest,) = [f for f in allreduce["figures"] if f["name"] == "allreduce.busbw_gbps" and f["params"]["bytes"]
                  == max(SIZES)]
    assert (f"all-reduce busbw measured on these hosts: {largest['value']:,.4g} GB/s at 64.0 KiB "
            f"(allreduce:torch:cpu:2:1, run {allreduce['run_id']})") in show.stdout
    measurement = accelbench("show", allreduce["run_id"], "--db", str(golden_two_nodes.db))
    assert "measured on these hosts" not in measurement.stdout  # the measurement itself is no training round


def test_a_gemm_rounds_precision_is_its_own_dtypes_not_the_training_default():
    """A bf16/fp16 GEMM run on an H200 was listed as fp32 in `report` (its workload's train default)."""
    from run_benchmarks.results.store.schema import row_from_document

    from .test_results import document

    gemm = document("run-g", "gemm", "torch", 0.5)
    gemm["workload"] = {"task": "micro", "train": {"precision": "fp32"},
                        "micro": {"bench": "gemm", "dtypes": ["bf16", "fp16", "bf16"]}}
    membw = document("run-m", "membw", "torch", 0.5)
    membw["workload"] = {"task": "micro", "train": {"precision": "bf16"}, "micro": {"bench": "membw", "dtypes": ["bf16"]}}
    train = document("run-t", "gpt3_tiny", "torch", 0.5)
    assert [row_from_document(d)["precision"] for d in (gemm, membw, train)] == ["bf16+fp16", "fp32", "bf16"]

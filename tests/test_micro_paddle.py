"""Micro-benchmark cases with Paddle (training/micro/paddle_ops.py) on the real ``paddle.distributed.launch`` with
gloo: the same figure records as torch's, and ``unsupported`` (with Paddle's reason) for what Paddle's CPU place
lacks. The formulas are written out here again, not imported, so a wrong one cannot pass itself.

Two starts for the module, not ten rounds. One ``accelbench run`` through the real CLI (``cli_rounds``): gemm and
membw on one rank, ok, and reduce-scatter on two, which gloo refuses: exit 1, the round ``unsupported`` in
results.json and the store, no figure in either, the store's copy of every figure the document's. One launch
of two ranks (``launched``: tests/parity_launch.py; every case planned as ``accelbench run`` plans it, the
worker's entry run in turn for each, the ranks' records read as the orchestrator reads a round's) holds the four
collectives that run (figures per nccl-tests' formulas) and what else Paddle's CPU lacks (all-to-all, sendrecv,
a bf16 GEMM): each was a round of its own, ~4.6 CPU s of launcher and ranks' start apiece; the launch of all
eight took ~6 s. What the orchestrator makes of a round from those records (status, the store row, exit 1)
is the CLI round's to show, and the torch micro golden's (tests/test_micro_cases.py) for 2-rank collectives.
The bf16 GEMM runs on each of the launch's two ranks (one rank each: the same matmul, the same refusal).
"""
from __future__ import annotations

import importlib.util
import json

import pytest

if importlib.util.find_spec("paddle") is None:
    pytest.skip("paddle is not installed", allow_module_level=True)

from .parity_launch import Launch, Run, launch
from .runner import run_cli
from .test_micro_cases import assert_gemm_is_2mnk_over_time, by_params
from .test_parity import ONE_THREAD

SIZES = [1024, 65536]
FEW = ("micro.iters=3", "micro.warmup=1")
# nccl-tests, doc/PERFORMANCE.md
BUS_FACTOR = {"allreduce": 2 * (2 - 1) / 2, "allgather": (2 - 1) / 2, "broadcast": 1.0, "reduce": 1.0}
NBYTES = 1 << 20  # membw's arrays
# What Paddle's CPU place lacks: gloo's process group has no reduce-scatter and no all-to-all, and its isend waits
# for the peer's receive (a sendrecv would deadlock); matmul has no bf16 kernel on a CPU
MISSING = {
    "reducescatter": ("paddle.distributed.reduce_scatter", "ProcessGroupGLOO does not support reduce_scatter"),
    "alltoall": ("paddle.distributed.alltoall_single", "ProcessGroupGLOO does not support all_to_all"),
    "sendrecv": ("paddle.distributed.batch_isend_irecv does not run on cpu",
                 "GLOO process group: its isend waits for the peer's receive"),
    "gemm_bf16": ("bf16 GEMM (paddle.matmul in bfloat16) does not run on cpu", "kernel `matmul` is not registered"),
}


@pytest.fixture(scope="module")
def cli_rounds(tmp_path_factory) -> dict[str, tuple[dict, dict]]:
    """One round of each case in one ``accelbench run``: {case: (results.json, store row)}."""
    names = ["gemm:paddle:cpu:1:1", "membw:paddle:cpu:1:1", "reducescatter:paddle:cpu:1:2"]
    sets = (*FEW, "micro.shapes=[[32,48,16],[64,64,64]]", f"micro.sizes_bytes=[{NBYTES}]")
    result = run_cli(tmp_path_factory.mktemp("micro_paddle"), "run", *names,
                     *(word for setting in sets for word in ("--set", setting)), timeout=300)
    assert result.returncode == 1, "README: exit 1 when a round is not ok (unsupported included)\n" \
        + result.stdout[-3000:] + result.stderr[-3000:]
    documents = {d["case"]["case"]: d for d in result.results()}
    rows = {r["case"]: r for r in result.attempts()}
    assert sorted(documents) == sorted(rows) == sorted(n.split(":")[0] for n in names)
    for case, document in documents.items():
        assert document["case"]["framework"] == "paddle"
        assert (rows[case]["figures"] or []) == document["figures"]  # the store keeps no figures as None
    return {case: (documents[case], rows[case]) for case in documents}


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Launch:
    """The 2-rank cases in one launch, in turn; each label a case (``gemm_bf16``: gemm in bf16)."""
    runs = [Run(op, f"{op}:paddle:cpu:1:2", (*FEW, f"micro.sizes_bytes={SIZES}"))
            for op in [*BUS_FACTOR, "alltoall", "sendrecv"]]
    runs.append(Run("gemm_bf16", "gemm:paddle:cpu:1:2", (*FEW, "micro.dtypes=[bf16]", "micro.shapes=[[16,16,16]]")))
    done = launch(tmp_path_factory.mktemp("micro_paddle_launch"), runs, env=ONE_THREAD)
    assert done.launches == 1 and done.finished == {run.label for run in runs}, done.errors
    assert list(done.system_tmp.iterdir()) == []  # the launcher kept its files in the run folder
    return done


def assert_ok_on_paddle(document: dict) -> None:
    assert document["status"] == "ok", document["reason"]
    assert document["metrics"] is None and document["steps_completed"] == 0  # figures, not training steps
    (node,) = document["environment"]["nodes"]
    assert node["environment"]["paddle"] and "torch" not in node["environment"]  # measured by Paddle


def launched_figures(done: Launch, label: str, world: int = 2) -> list[dict]:
    """The round's figures as the orchestrator combines the ranks' records (results.json's ``figures``), after
    what makes a micro round ok: every rank started in a world of ``world``, ended with no step and nothing
    unsupported, and was measured by Paddle."""
    from run_benchmarks.results.figures.task import round_figures

    ranks = done.ranks(label)
    assert len(ranks) == world
    for rank in ranks:
        assert rank.start is not None and rank.end is not None and rank.unsupported is None, rank.problems
        assert rank.start.world_size == world and rank.steps_done == 0  # figures, not training steps
    # the node's environment, as results.json takes it: the first rank's that reports one
    environment = next(rank.start.environment for rank in ranks if rank.start.environment)
    assert environment["paddle"] and "torch" not in environment  # measured by Paddle
    return [figure.to_dict() for figure in round_figures(ranks)]


def test_gemm_and_membw_on_paddle_follow_the_formulas(cli_rounds):
    gemm, _ = cli_rounds["gemm"]
    assert_ok_on_paddle(gemm)
    best = assert_gemm_is_2mnk_over_time(gemm["figures"])
    assert best["params"] == {"dtype": "fp32"}

    membw, _ = cli_rounds["membw"]
    assert_ok_on_paddle(membw)
    figures = {f["name"]: f for f in membw["figures"]}
    assert sorted(figures) == ["membw.copy_gbps", "membw.copy_time_s", "membw.triad_gbps", "membw.triad_time_s"]
    for kernel, arrays in (("copy", 2), ("triad", 3)):  # STREAM: each array read or written once
        bw, t = figures[f"membw.{kernel}_gbps"], figures[f"membw.{kernel}_time_s"]
        assert bw["params"] == {"bytes": NBYTES, "dtype": "fp32", "inputs": "normal", "seed": 1234} \
            and bw["unit"] == "GB/s" and t["value"] > 0
        assert bw["value"] == pytest.approx(arrays * NBYTES / t["value"] / 1e9, rel=1e-12)


@pytest.mark.parametrize("op", list(BUS_FACTOR))
def test_collectives_on_paddle_follow_nccl_tests_formulas(launched, op):
    factor, figures = BUS_FACTOR[op], launched_figures(launched, op)
    times = by_params(figures, f"{op}.time_s")
    algbw, busbw = by_params(figures, f"{op}.algbw_gbps"), by_params(figures, f"{op}.busbw_gbps")
    assert sorted(json.loads(k)["bytes"] for k in times) == SIZES  # whole fp32 elements per rank already
    assert times.keys() == algbw.keys() == busbw.keys()
    for key, t in times.items():
        p = t["params"]
        assert p == {"op": op, "bytes": p["bytes"], "dtype": "fp32", "ranks": 2, "inputs": "normal", "seed": 1234}
        assert t["ranks"] == 2 and t["value"] > 0  # every rank reported the slowest rank's time
        assert "max over 2 ranks" in t["formula"]
        assert algbw[key]["value"] == pytest.approx(p["bytes"] / t["value"] / 1e9, rel=1e-12)
        assert busbw[key]["value"] == pytest.approx(algbw[key]["value"] * factor, rel=1e-12)


def test_an_unsupported_round_through_the_cli_exits_1_with_the_reason_and_no_figure(cli_rounds):
    document, row = cli_rounds["reducescatter"]
    assert document["status"] == row["status"] == "unsupported" and row["world_size"] == 2
    what, why = MISSING["reducescatter"]
    assert what in document["reason"] and why in document["reason"], document["reason"]
    assert document["figures"] == [] and not row["figures"]  # no figure stands in for the missing operation


@pytest.mark.parametrize("label", [label for label in MISSING if label != "reducescatter"])
def test_what_paddles_cpu_lacks_is_unsupported_with_the_reason(launched, label):
    """Every rank finds out (each asks Paddle, or gloo refuses before any rank sends) and says so in its
    unsupported record, which the orchestrator's reason quotes; no rank reports a figure."""
    what, why = MISSING[label]
    for rank in launched.ranks(label):
        assert rank.unsupported is not None and rank.end is None, rank.problems
        reason = rank.unsupported.reason
        assert what in reason and why in reason, reason
        assert rank.figures == []  # no figure stands in for the missing operation

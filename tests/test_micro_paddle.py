"""Micro-benchmark cases with Paddle (training/micro/paddle_ops.py) through the real CLI and the real
``paddle.distributed.launch`` with gloo: the same figure records as torch's, and ``unsupported`` (exit 1, with
Paddle's reason) for what Paddle's CPU place lacks. The formulas are written out here again, not imported,
so a wrong one cannot pass itself. Several cases share one ``accelbench run`` to keep the launches few."""
from __future__ import annotations

import importlib.util
import json

import pytest

if importlib.util.find_spec("paddle") is None:
    pytest.skip("paddle is not installed", allow_module_level=True)

from .test_micro_cases import assert_gemm_is_2mnk_over_time, by_params

SIZES = [1024, 65536]
FEW = ("--set", "micro.iters=3", "--set", "micro.warmup=1")
# nccl-tests, doc/PERFORMANCE.md
BUS_FACTOR = {"allreduce": 2 * (2 - 1) / 2, "allgather": (2 - 1) / 2, "broadcast": 1.0, "reduce": 1.0}


def rounds(cli, names: list[str], *sets: str, expect_rc: int = 0) -> dict[str, tuple[dict, dict]]:
    """One round of each case name in one run: {case: (results.json, store row)}."""
    result = cli("run", *names, *sets, timeout=300)
    assert result.returncode == expect_rc, result.stdout[-3000:] + result.stderr[-3000:]
    documents = {d["case"]["case"]: d for d in result.results()}
    rows = {r["case"]: r for r in result.attempts()}
    assert sorted(documents) == sorted(rows) == sorted(n.split(":")[0] for n in names)
    for case, document in documents.items():
        assert document["case"]["framework"] == "paddle"
        assert (rows[case]["figures"] or []) == document["figures"]  # the store keeps no figures as None
    return {case: (documents[case], rows[case]) for case in documents}


def assert_ok_on_paddle(document: dict) -> None:
    assert document["status"] == "ok", document["reason"]
    assert document["metrics"] is None and document["steps_completed"] == 0  # figures, not training steps
    (node,) = document["environment"]["nodes"]
    assert node["environment"]["paddle"] and "torch" not in node["environment"]  # measured by Paddle


def test_gemm_and_membw_on_paddle_follow_the_formulas(cli):
    nbytes = 1 << 20
    done = rounds(cli, ["gemm:paddle:cpu:1:1", "membw:paddle:cpu:1:1"], *FEW,
                  "--set", "micro.shapes=[[32,48,16],[64,64,64]]", "--set", f"micro.sizes_bytes=[{nbytes}]")
    gemm, _ = done["gemm"]
    assert_ok_on_paddle(gemm)
    best = assert_gemm_is_2mnk_over_time(gemm["figures"])
    assert best["params"] == {"dtype": "fp32"}

    membw, _ = done["membw"]
    assert_ok_on_paddle(membw)
    figures = {f["name"]: f for f in membw["figures"]}
    assert sorted(figures) == ["membw.copy_gbps", "membw.copy_time_s", "membw.triad_gbps", "membw.triad_time_s"]
    for kernel, arrays in (("copy", 2), ("triad", 3)):  # STREAM: each array read or written once
        bw, t = figures[f"membw.{kernel}_gbps"], figures[f"membw.{kernel}_time_s"]
        assert bw["params"] == {"bytes": nbytes, "dtype": "fp32", "inputs": "normal", "seed": 1234} \
            and bw["unit"] == "GB/s" and t["value"] > 0
        assert bw["value"] == pytest.approx(arrays * nbytes / t["value"] / 1e9, rel=1e-12)


def test_collectives_on_paddle_follow_nccl_tests_formulas(cli):
    done = rounds(cli, [f"{op}:paddle:cpu:1:2" for op in BUS_FACTOR], "--set", f"micro.sizes_bytes={SIZES}", *FEW)
    for op, factor in BUS_FACTOR.items():
        document, row = done[op]
        assert_ok_on_paddle(document)
        assert row["world_size"] == 2
        stored = row["figures"]  # the store's copy: time and bytes as every report reads them
        times = by_params(stored, f"{op}.time_s")
        algbw, busbw = by_params(stored, f"{op}.algbw_gbps"), by_params(stored, f"{op}.busbw_gbps")
        assert sorted(json.loads(k)["bytes"] for k in times) == SIZES  # whole fp32 elements per rank already
        assert times.keys() == algbw.keys() == busbw.keys()
        for key, t in times.items():
            p = t["params"]
            assert p == {"op": op, "bytes": p["bytes"], "dtype": "fp32", "ranks": 2, "inputs": "normal", "seed": 1234}
            assert t["ranks"] == 2 and t["value"] > 0  # every rank reported the slowest rank's time
            assert "max over 2 ranks" in t["formula"]
            assert algbw[key]["value"] == pytest.approx(p["bytes"] / t["value"] / 1e9, rel=1e-12)
            assert busbw[key]["value"] == pytest.approx(algbw[key]["value"] * factor, rel=1e-12)


def test_what_paddles_cpu_lacks_is_unsupported_with_the_reason(cli):
    # gloo's process group has no reduce-scatter and no all-to-all, and its isend waits for the peer's receive
    # (a sendrecv would deadlock); matmul has no bf16 kernel on a CPU
    done = rounds(cli, ["reducescatter:paddle:cpu:1:2", "alltoall:paddle:cpu:1:2", "sendrecv:paddle:cpu:1:2",
                        "gemm:paddle:cpu:1:1"],
                  "--set", "micro.sizes_bytes=[1024]", "--set", "micro.dtypes=[bf16]",
                  "--set", "micro.shapes=[[16,16,16]]", *FEW, expect_rc=1)
    missing = {
        "reducescatter": ("paddle.distributed.reduce_scatter", "ProcessGroupGLOO does not support reduce_scatter"),
        "alltoall": ("paddle.distributed.alltoall_single", "ProcessGroupGLOO does not support all_to_all"),
        "sendrecv": ("paddle.distributed.batch_isend_irecv does not run on cpu",
                     "GLOO process group: its isend waits for the peer's receive"),
        "gemm": ("bf16 GEMM (paddle.matmul in bfloat16) does not run on cpu", "kernel `matmul` is not registered"),
    }
    for case, (what, why) in missing.items():
        document, row = done[case]
        assert document["status"] == row["status"] == "unsupported"
        assert what in document["reason"] and why in document["reason"], document["reason"]
        assert document["figures"] == [] and not row["figures"]  # no figure stands in for the missing operation

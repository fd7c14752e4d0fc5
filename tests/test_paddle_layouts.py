"""Paddle layouts on 2 CPU ranks: what the loss parity tests of ``test_paddle.py`` cannot see.

Replicated parameters must start identical on every tensor-parallel rank even without a shared
``train.init_weights`` file: the parity tests load one, which hides a per-rank seed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, copy_tree, expect_shared_machine
from .test_plan import build


CASE = "gpt3_tiny"


LAYOUTS = {"tp2": ("parallel.tensor_parallel_degree=2",),
           "tp2_sp": ("parallel.tensor_parallel_degree=2", "parallel.sequence_parallel=true")}


@pytest.fixture(scope="module")
def checksums(tmp_path_factory) -> dict[str, list[dict]]:
    """Per layout, per rank, the parameters' checksums after the worker's init (``tests/paddle_rank_checksums.py``),
    from one ``paddle.distributed.launch`` of 2 ranks holding both layouts (one fleet layout: TP 2)."""
    tmp_path = tmp_path_factory.mktemp("paddle-layouts")
    root = tmp_path / "root"
    for folder in ("cases", "vendors", "configs"):
        copy_tree(ROOT / folder, root / folder)
    expect_shared_machine(root / "configs" / "test_conf.yaml")
    pairs = []
    for name, settings in LAYOUTS.items():
        (case,) = build(root, tmp_path / name, f"{CASE}:paddle:cpu:1:2", assignments=settings).cases
        config, out = tmp_path / name / "config.json", tmp_path / name / "out"
        out.mkdir(parents=True)
        config.write_text(case.rounds[0].worker_config.model_dump_json())
        pairs += [str(config), str(out)]
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    argv = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node=2", f"--log_dir={tmp_path / 'log'}",
            str(ROOT / "tests" / "paddle_rank_checksums.py"), *pairs]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(system_tmp)})
    logs = "".join(p.read_text() for p in sorted((tmp_path / "log").glob("workerlog.*")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    return {name: [json.loads((tmp_path / name / "out" / f"rank{rank}.json").read_text()) for rank in range(2)]
            for name in LAYOUTS}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_replicated_parameters_start_identical_on_every_tensor_parallel_rank(checksums, layout):
    """No init_weights file (the case has none): norms, learned positions and row biases are equal on both
    TP ranks as built (the group-sharded stage 2/3 path wraps no fleet TensorParallel, whose broadcast hides
    a per-rank seed in the other layouts) and as the worker keeps them; each rank's shards draw their own."""
    ranks = checksums[layout]
    assert sorted(r["tp_rank"] for r in ranks) == [0, 1]
    for stage in ("built", "kept"):
        first, second = (r[stage] for r in ranks)
        assert first.keys() == second.keys()
        replicated = [name for name, p in first.items() if not p["distributed"]]
        sharded = [name for name, p in first.items() if p["distributed"]]
        assert any("wpe" in name for name in replicated) and any("ln_1" in name for name in replicated)
        assert sharded, "tensor parallel 2 has model-parallel shards"
        differ = [name for name in replicated if first[name]["sha256"] != second[name]["sha256"]]
        assert not differ, f"{stage}: replicated parameters differ across TP ranks: {differ}"
        same = [name for name in sharded if first[name]["sha256"] == second[name]["sha256"]
                and not name.endswith("bias")]  # biases start at zero on every shard
        assert not same, f"{stage}: TP shards drew the same values on both ranks: {same}"

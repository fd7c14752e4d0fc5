"""``accelbench history`` on real runs (issue 46): seven 1-process gpt2_tiny runs (goldens.SHORT, a smaller model),
one after another into one store; from the fifth on, every step is slowed by an injected 2 s delay
(``debug.compute_delay_ms``: a straggler's sleep). The history finds one change point at the fifth run, calls it
a regression beyond the noise (``--check``: exit 3), and names the setting that changed there. Six is the fewest
the rules judge (three points on each side). Four plain runs: on a loaded machine (load 5-12 on 2 cores, two
OpenMP threads) their steps scattered 2-5x (0.08-0.43 s), so one may be an outlier, left out, and three must
remain. Three delayed ones: a 2 s sleep per step puts them past any plain run's scatter, and none can sit the
5 sigma off the others an outlier needs (sigma is at least the plain runs' own noise). The 0.4 s delay of
before did not: a plain run at 0.43 s was read as the change's first point (so it asked for a fourth delayed
run). The runs are made once for the module."""
from __future__ import annotations

import json
import os

import pytest

from .conftest import ROOT
from .goldens import SHORT
from .runner import copy_tree, expect_shared_machine, run_cli

CASE = "gpt2_tiny:torch:cpu:1:1"
# A model small enough that its step takes milliseconds on a quiet machine (0.08-0.43 s at load 5-7), and a delay
# that dwarfs the step's spread between runs (measured: 0.3 s-steps of the full gpt2_tiny varied 4x at load 12).
SMALL = ("--set", "model.n_layer=1", "--set", "model.d_model=32", "--set", "model.seq_len=32",
         "--set", "train.micro_batch_size=1", "--set", "train.breakdown_steps=0")
# sleeps (the lanes beside it keep the cores): ~20x the small model's step on a loaded machine, past its scatter
DELAY = ("--set", "debug.compute_delay_ms=2000",)
RUNS, PLAIN = 7, 4
# One OpenMP thread, as torchrun gives each rank of a launch of several: two threads spinning at every barrier
# beside the other lanes are most of those 0.08-0.43 s steps, and their CPU (tests/test_loss_runs.py measured ~3x).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def delayed_series(tmp_path_factory):
    """(workdir, db, run ids oldest first): PLAIN plain runs, then the rest with the delay."""
    workdir = tmp_path_factory.mktemp("history-runs")
    root = workdir / "root"
    for folder in ("cases", "vendors", "configs"):
        copy_tree(ROOT / folder, root / folder)
    expect_shared_machine(root / "configs" / "test_conf.yaml")  # the lanes' load never makes a round contended
    os.symlink(ROOT / "training", root / "training")
    logs = workdir / "logs"
    for n in range(RUNS):
        done = run_cli(workdir, "run", CASE, *SHORT, *SMALL, *(DELAY if n >= PLAIN else ()), "--root", str(root),
                       log_root=logs, extra_env=ONE_THREAD)
        assert done.returncode == 0, done.stderr[-3000:]
    run_ids = sorted(p.name for p in logs.iterdir() if p.is_dir())
    assert len(run_ids) == RUNS
    return workdir, logs / "results.db", run_ids


@pytest.mark.e2e  # the runs are real; `history` reads their store in this process (the `accelbench` fixture)
def test_the_injected_delay_is_one_change_point_naming_the_setting(delayed_series, accelbench):
    workdir, db, run_ids = delayed_series
    done = accelbench("history", "--db", str(db), "--format", "json", "--check")
    assert done.returncode == 3, done.stdout + done.stderr
    (workload,) = json.loads(done.stdout)["workloads"]  # one workload: debug settings are not another
    assert [p["run_id"] for p in workload["points"]] == run_ids
    (change,) = workload["change_points"]
    assert change["run_id"] == run_ids[PLAIN] and change["verdict"] == "regression" and change["size"] < -0.5
    assert change["after"] == {"first_run": run_ids[PLAIN], "last_run": run_ids[-1], "points": RUNS - PLAIN}
    changed = {c["key"]: (c["before"], c["after"]) for c in change["changed_here"]}
    assert changed["debug.compute_delay_ms"] == ("-", "2000.0")
    text = accelbench("history", "--db", str(db), "--check")
    assert text.returncode == 3 and "changed here: " in text.stdout
    assert "debug.compute_delay_ms - -> 2000.0" in text.stdout

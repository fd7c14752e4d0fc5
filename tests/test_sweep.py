"""``accelbench sweep``: the grid, every point's row (ok, oom, skipped), Ctrl-C and --resume, and the
max-batch search, on real torchrun runs of gpt2_tiny (few steps each)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from run_benchmarks.errors import UserError
from run_benchmarks.sweep.batch import search_max_batch
from run_benchmarks.sweep.grid import SweepFile, expand, grid_axis, merge_command_line

from . import test_harness
from .conftest import ROOT, write
from .runner import ends_with_the_test

acme_root = test_harness.acme_root  # the harness tests' fake accelerator (a fixture)

FEW = {"train.steps": 4, "train.warmup_steps": 1}


def sweep_cmd(*args: str, log_root: Path) -> list[str]:
    return [sys.executable, "-m", "run_benchmarks.cli", "sweep", *args, "--log-root", str(log_root)]


def run_sweep(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    return subprocess.run(sweep_cmd(*args, log_root=tmp_path / "logs"), cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=ends_with_the_test())


def logs_tail(tmp_path: Path, chars: int = 3000) -> str:
    """The last lines of every log of the sweep's rounds that did not end ok, for a failure message."""
    tails = []
    for results in sorted((tmp_path / "logs").glob("*/*/round*/results.json")):
        if json.loads(results.read_text()).get("status") != "ok":
            tails += [f"--- {p.relative_to(tmp_path)}\n{p.read_text(errors='replace')[-chars:]}"
                      for p in sorted(results.parent.glob("**/*.log"))]
    return "\n".join(tails)


def state(run_dir: Path) -> dict:
    return json.loads((run_dir / "sweep.json").read_text())


# ---------------------------------------------------------------- the grid and the search, without runs


def test_search_finds_what_trying_every_size_finds():
    for largest_fitting in range(0, 40):
        tried = []

        def try_size(size: int) -> str:
            tried.append(size)
            return "ok" if size <= largest_fitting else "oom"

        found = search_max_batch(try_size, limit=64)
        one_by_one = max((s for s in range(1, 65) if try_size(s) == "ok"), default=None)
        assert found.largest == one_by_one and found.complete
        assert len(found.tried) == len({s for s, _ in found.tried})  # each size once


def test_search_stops_on_an_answer_that_is_not_about_memory():
    found = search_max_batch(lambda size: "ok" if size < 4 else "failed", limit=64)
    assert found.largest == 2 and not found.complete and "ended failed" in found.stopped


def test_memory_limit_takes_the_real_oom_path_once_the_peak_is_above_it(acme_root, capsys):
    from training import harness, train_task
    from training.faults import OOM_REQUEST_BYTES
    from training.contract.spec import DebugSpec

    FakeWorker, acme, launcher = test_harness.FakeWorker, test_harness.acme, test_harness.LAUNCHER
    peak = FakeWorker.memory(None).peak_allocated  # the fake device's allocator peak, in bytes
    harness.run(acme(debug=DebugSpec(memory_limit_mib=peak / 2**20)), train_task.over(FakeWorker), launcher)  # at the limit: fits
    assert f"allocate {OOM_REQUEST_BYTES}" not in FakeWorker.last.calls
    with pytest.raises(MemoryError):
        harness.run(acme(debug=DebugSpec(memory_limit_mib=peak / 2 / 2**20)), train_task.over(FakeWorker), launcher)
    assert FakeWorker.last.calls[-1] == f"allocate {OOM_REQUEST_BYTES}" and FakeWorker.last.calls.count("step") == 1
    assert "above debug.memory_limit_mib" in capsys.readouterr().err


def test_grid_crosses_axes_with_exclusions_and_where_rules():
    sweep = SweepFile.model_validate({
        "cases": ["gpt2_tiny:torch:cpu:1:1"], "set": {"train.steps": 3},
        "axes": {"mb": {"key": "train.micro_batch_size", "values": [1, 2]},
                 "strategy": {"values": {"ddp": {}, "stage2": {"parallel.sharding": "stage2"}}},
                 "layout": {"key": "layout", "values": ["1x1", "1x2"]}},
        "exclude": [{"mb": 2, "layout": "1x1"}],
        "where": [{"match": {"strategy": "stage2"}, "set": {"train.precision": "fp16"}}]})
    points = expand(sweep)
    assert len(points) == 6
    names = {p.case_name for p in points}
    assert names == {"gpt2_tiny:torch:cpu:1:1", "gpt2_tiny:torch:cpu:1:2"}
    stage2 = [p for p in points if p.labels["strategy"] == "stage2"]
    assert all('train.precision="fp16"' in p.sets and 'parallel.sharding="stage2"' in p.sets for p in stage2)
    assert all(p.sets[0] == "train.steps=3" for p in points)
    merged = merge_command_line(sweep, [], ["nprocs_per_node=1,2"], ["train.steps=5"])
    assert merged.axes["nprocs_per_node"].key == "nprocs_per_node" and merged.set["train.steps"] == 5
    with pytest.raises(UserError, match="names no axis"):
        expand(sweep.model_copy(update={"exclude": [{"nope": 1}]}))
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        grid_axis("train.micro_batch_size")


def test_a_bad_sweep_file_is_one_message_naming_the_key(accelbench, tmp_path):
    bad = write(tmp_path / "bad.yaml", "cases: [gpt2_tiny:torch:cpu:1:1]\naxes:\n  mb: {values: [1, 2]}\n")
    done = accelbench("sweep", "--file", str(bad), "--dry-run", "--log-root", tmp_path / "logs")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "bad.yaml" in done.stderr and "key" in done.stderr


def test_views_put_oom_and_skips_in_their_cells_and_compute_speedup_and_efficiency():
    from run_benchmarks.results.report import views as tables
    from run_benchmarks.sweep import views
    from run_benchmarks.sweep.state import Row

    def row(i, fw, procs, status="ok", tok=None):
        return Row(i, {"framework": fw, "procs": str(procs)}, f"gpt2_tiny:{fw}:cpu:1:{procs}", status,
                   world_size=procs, tokens_per_s_per_device=tok, tokens_per_s_total=tok and tok * procs,
                   peak_memory_bytes=tok and 2**20 * 300)
    rows = [row(0, "torch", 1, tok=1000.0), row(1, "torch", 2, tok=800.0), row(2, "paddle", 1, tok=1100.0),
            row(3, "paddle", 2, "oom"), row(4, "paddle", 4, "skipped")]
    pivot = views.pivot(rows, ["framework", "procs"])
    assert pivot.headers == ["framework", "procs=1", "procs=2", "procs=4"]
    assert pivot.rows[1][2] == "OOM" and pivot.rows[1][3] == "skipped" and pivot.rows[0][3] == "-"
    versus = views.versus(rows, "framework", "torch", "paddle")
    assert versus.rows[0][-1] == f"{(1100.0 / 1000.0 - 1) * 100:+.1f}%" and versus.rows[1][-1] == ""
    scaled = views.scaling(rows, "procs")
    torch_2 = next(r for r in scaled.rows if r[0] == "torch" and r[1] == "2")
    assert torch_2[-1] == f"{(1600.0 / 1000.0) / 2:.0%}"
    assert "| OOM |" in tables.to_markdown(pivot)
    page = tables.html_page("t <x>", [pivot], views.scaling_chart(rows, "procs"))
    assert "t &lt;x&gt;" in page and 'class="oom"' in page and "<svg" in page


def test_test_conf_entries_give_a_case_its_own_extern_config_and_settings(accelbench, tmp_path):
    conf = write(tmp_path / "test_conf.yaml", "cases:\n  - gpt2_tiny:torch:cpu:1:1\n"
                 "  - {case: gpt3_tiny:torch:cpu:1:2, extern_config: config_TP1PP1SH1SP2cpux1x2,"
                 " set: {train.micro_batch_size: 3}}\n")
    done = accelbench("run", "--dry-run", "--test-conf", str(conf))
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("gpt3_tiny:torch:cpu:1:2", 1)
    assert "extern config: (none)" in first and "micro batch 8 " in first
    assert "config_TP1PP1SH1SP2cpux1x2.yaml" in second and "micro batch 3 " in second
    # a sweep over test_conf's list
    swept = accelbench("sweep", "--dry-run", "--test-conf", str(conf), "--log-root", tmp_path / "logs")
    assert swept.returncode == 0, swept.stderr
    assert "train.micro_batch_size=3" in swept.stdout and swept.stdout.count("-> runs") == 2


# ---------------------------------------------------------------- acceptance: real points, OOM, Ctrl-C, resume


def test_sweep_rows_oom_skip_and_resume_after_ctrl_c(tmp_path):
    """Five points, three of them launched: one the plan skips (stage2 on one rank), ok points, one that
    ends as a real out-of-memory, and a torch 2.12 point preflight refuses (this checkout has 2.13: that point
    skipped with preflight's reason, the rest run). Ctrl-C once two points have their rows, then --resume."""
    sweep_file = write(tmp_path / "sweep.yaml", json.dumps({
        "cases": ["gpt2_tiny:torch:cpu:1:1"], "set": FEW,
        "axes": {"framework": {"key": "framework", "values": ["torch_2.13", "torch_2.12"]},
                 "strategy": {"values": {"stage2": {"parallel.sharding": "stage2"}, "ddp": {}}},
                 "processes": {"key": "nprocs_per_node", "values": [1, 2]}},
        "exclude": [{"framework": "torch_2.12", "strategy": "stage2"}, {"framework": "torch_2.12", "processes": 2}],
        # a memory limit every process is above: this one point ends as a real out-of-memory
        "where": [{"match": {"strategy": "ddp", "processes": 2}, "set": {"debug.memory_limit_mib": 1}}]}))
    log_root = tmp_path / "logs"
    out, err = tmp_path / "sweep.out", tmp_path / "sweep.err"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(sweep_cmd("--file", str(sweep_file), log_root=log_root), cwd=tmp_path, env=env,
                                stdout=o, stderr=e, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=ends_with_the_test())
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # Ctrl-C once two points have their rows
        runs = [p for p in log_root.glob("*/sweep.json")] if log_root.is_dir() else []
        if runs and len(state(runs[0].parent)["rows"]) >= 2:
            break
        assert proc.poll() is None, err.read_text()[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130, err.read_text()[-3000:]
    stderr = err.read_text()
    assert "Traceback" not in stderr, stderr[-3000:]
    (run_dir,) = [p.parent for p in log_root.glob("*/sweep.json")]
    assert f"Resume with: accelbench sweep --resume {run_dir.name}" in stderr
    before = state(run_dir)["rows"]
    finished_before = {r["point"] for r in before if r["status"] not in ("pending", "interrupted")}
    assert len(finished_before) >= 2 and any(r["status"] == "pending" for r in before)

    resumed = run_sweep(tmp_path, "--resume", run_dir.name, "--format", "markdown")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = state(run_dir)["rows"]
    by_point = {r["point"]: r for r in rows}
    assert sorted(by_point) == list(range(5)) and len(rows) == 5  # every point has its row, once
    status = {(r["labels"]["framework"], r["labels"]["strategy"], r["labels"]["processes"]): r["status"]
              for r in rows}
    assert status.pop(("torch_2.13", "ddp", "2")) == "oom"
    assert status.pop(("torch_2.13", "stage2", "1")) == status.pop(("torch_2.12", "ddp", "1")) == "skipped"
    assert set(status.values()) == {"ok"}
    planned, refused = (next(r for r in rows if r["status"] == "skipped" and r["labels"]["framework"] == f)
                        for f in ("torch_2.13", "torch_2.12"))
    assert "sharding stage2 needs more than one data-parallel rank" in planned["reason"]
    assert refused["reason"].startswith("preflight: ") and "asks for torch 2.12" in refused["reason"]
    # the table: the OOM cell in the pivot (framework x strategy by processes)
    pivot = resumed.stdout[resumed.stdout.index("by processes"):]
    assert "| torch_2.13 | ddp |" in pivot and "| OOM |" in pivot and "| skipped |" in pivot
    # resume ran only what was left: points finished before kept their single round
    for point in finished_before:
        assert f"p{point:02d} " in resumed.stderr and "(done before: kept)" in resumed.stderr
        kept = [json.loads(p.read_text())["status"] for p in run_dir.glob(f"p{point:02d}-*/round*/results.json")]
        assert len(kept) == (0 if by_point[point]["status"] == "skipped" else 1), point
    ran_now = [p for p in by_point if p not in finished_before and by_point[p]["status"] != "skipped"]
    for point in ran_now:
        final = [json.loads(p.read_text())["status"] for p in run_dir.glob(f"p{point:02d}-*/round*/results.json")]
        assert [s for s in final if s != "interrupted"] == [by_point[point]["status"]], point


# ---------------------------------------------------------------- max-batch search against every size


def test_max_batch_finds_the_largest_size_trying_every_size_finds(tmp_path):
    """Memory per sample is made large (a 65,536-token vocabulary over 512 positions: 128 MiB of logits a
    sample, several times that with their gradients) so that one sample is far above the peak RSS noise
    between processes (a limit half a sample from two peaks once failed at 32 MiB of logits a sample, under
    load). Sizes 1 and 2 are run once without a limit (a size past the limit's first failure would show the
    search nothing more); the limit is set halfway between their peaks; the search with that limit (the real
    out-of-memory path) must find the size that trying each size one by one against it finds, and fail the next.
    The bisection between sizes is checked in-process above."""
    model = ["--set", "model.vocab_size=65536", "--set", "model.seq_len=512", "--set", "train.steps=2",
             "--set", "train.warmup_steps=1", "--set", "train.breakdown_steps=0"]
    base = "gpt2_tiny:torch:cpu:1:1"
    every = run_sweep(tmp_path, base, *model, "--grid", "train.micro_batch_size=1,2")
    assert every.returncode == 0, every.stderr[-3000:] + logs_tail(tmp_path)
    (run_dir,) = [p.parent for p in (tmp_path / "logs").glob("*/sweep.json")]
    peaks = {int(r["micro_batch_size"]): r["peak_memory_bytes"] / 2**20 for r in state(run_dir)["rows"]}
    assert peaks[1] < peaks[2], peaks  # memory grows with the batch
    limit = (peaks[1] + peaks[2]) / 2
    one_by_one = max(size for size, peak in peaks.items() if peak <= limit)

    found = run_sweep(tmp_path, base, *model, "--max-batch", "--set", f"debug.memory_limit_mib={limit:.1f}")
    assert found.returncode == 0, found.stderr[-3000:] + logs_tail(tmp_path)
    (search_dir,) = [p.parent for p in (tmp_path / "logs").glob("*/sweep.json") if p.parent != run_dir]
    rows = state(search_dir)["rows"]
    tried = {r["micro_batch_size"]: r["status"] for r in rows}
    largest = [r["micro_batch_size"] for r in rows if r["search"] == "largest"]
    assert largest == [one_by_one], (peaks, limit, rows)
    assert tried[one_by_one + 1] == "oom" and all(tried[s] == "ok" for s in tried if s <= one_by_one)
    assert "largest that fits" in found.stdout


def test_a_sweep_whose_every_point_preflight_refuses_is_refused_whole(accelbench, tmp_path):
    """Exit 2, one message; nothing starts (so the CLI runs in this process)."""
    few = ["--set", "train.steps=3", "--set", "train.warmup_steps=1"]
    refused = accelbench("sweep", "gpt2_tiny:torch_2.12:cpu:1:1", "--grid", "train.seed=1,2", *few,
                         "--log-root", tmp_path / "logs")
    assert refused.returncode == 2 and "asks for torch 2.12" in refused.stderr and "Traceback" not in refused.stderr

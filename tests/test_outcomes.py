"""How a round ends when nothing went wrong with the training itself: a crash at exit after every figure was
reported (ok, with a warning), ranks that finished without a step in common (no figures), a log root without
room (refused before anything starts), and the installed ``accelbench`` command itself."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.execute import outcome
from run_benchmarks.results.worker_logs.rank_logs import RankLogs
from tests.infra.tmpfs import tmpfs
from training.contract import perflog, ports

from .conftest import ROOT, write
from .signal_faults import start
from .test_plan import build
from .checks import assert_complete_ok, leftover_processes
from .goldens import ONE_THREAD, SHORT, SHORT_STEPS, SHORT_WARMUP


def test_a_crash_at_exit_after_every_figure_keeps_the_round_ok_with_a_warning(golden_local):
    assert golden_local.result.returncode == 0  # the rounds are ok: every figure is in
    doc = golden_local.doc("opt_tiny:torch:cpu:1:1", **{"debug.exit_code_after_end": 7})
    assert_complete_ok(doc, world_size=1, steps=SHORT_STEPS, warmup=SHORT_WARMUP)
    (warning,) = [w for w in doc["warnings"] if "launcher exited" in w]
    assert warning.startswith("node 0 launcher exited with ") and "the figures are complete" in warning
    assert doc["environment"]["nodes"][0]["exit_code"] == 1  # torchrun: a worker exited with 7
    rounds = json.loads((golden_local.run_dir() / "summary.json").read_text())["rounds"]  # in the order they ran
    ran = [r["results"] for r in rounds]
    later = rounds[ran.index(doc["results_path"]) + 1:]  # the run went on to the cases after it
    assert later and all(r["status"] == "ok" for r in later)


def _rank_log(folder: Path, rank: int, measured_steps: range, world_size: int = 2) -> RankLogs:
    """A rank's stdout in the real perf-record format: start, warm-up step 0, its measured steps, end."""
    records = [perflog.StartRecord(rank=rank, local_rank=rank, node_rank=0, world_size=world_size, framework="torch",
                                   framework_version="2.13.0", device="cpu", precision="fp32", n_params=1000,
                                   flops_per_token=6000.0, flop_formula="6N", tokens_per_step=256),
               perflog.StepRecord(rank=rank, step=0, warmup=True, step_time_s=0.2, tokens=256, loss=7.0)]
    records += [perflog.StepRecord(rank=rank, step=s, warmup=False, step_time_s=0.1, tokens=256, loss=6.0)
                for s in measured_steps]
    records.append(perflog.EndRecord(rank=rank, steps=len(measured_steps) + 1, peak_memory_bytes=2**27,
                                     memory_total_bytes=2**34, memory_kind="rss"))
    stdout, stderr = folder / f"rank{rank}.stdout.log", folder / f"rank{rank}.stderr.log"
    stdout.write_text("".join(perflog.format_record(r) + "\n" for r in records))
    stderr.write_text("")
    return RankLogs(rank, stdout, stderr)


def test_ranks_that_finished_without_a_common_measured_step_give_no_figures_and_fail(root, tmp_path):
    """Both ranks report start, steps and end, but no measured step is common to both (their step counters
    disagree): there is nothing honest to report, so the round fails and says why."""
    (case,) = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2").cases
    (rnd,) = case.rounds
    rnd.nodes[0].log_dir.mkdir(parents=True)
    ranks = [collect.read_rank(_rank_log(rnd.nodes[0].log_dir, 0, range(1, 3))),
             collect.read_rank(_rank_log(rnd.nodes[0].log_dir, 1, range(3, 5)))]
    accumulated = analyze.RoundAccumulator()
    for rank in ranks:
        accumulated.add(rank)
    result = outcome.RoundResult(str(case.name), rnd.index, rnd.dir, status="failed")
    outcome.classify(case, rnd, result, "done", ranks, accumulated)
    assert result.status == "failed"
    assert result.reason == "no figures: no measured step is common to all ranks"
    assert result.metrics is None


@pytest.mark.parametrize("worlds, finished, status", [((2, 2), 2, "ok"), ((1, 1), 2, "failed"), ((2, 1), 2, "failed"),
                                                      ((1, 1), 1, "failed")])
def test_a_world_size_the_plan_did_not_ask_for_fails_the_round_and_names_the_ranks(root, tmp_path, worlds, finished,
                                                                                   status):
    """Each rank's start record says the world its launcher put it in; the plan asked for 2 (1 x 2). Another
    figure means the launch did not start the planned layout: the round fails and says which ranks said what
    (a round that failed anyway carries it as a warning)."""
    (case,) = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2").cases
    (rnd,) = case.rounds
    rnd.nodes[0].log_dir.mkdir(parents=True)
    ranks = [collect.read_rank(_rank_log(rnd.nodes[0].log_dir, rank, range(1, 3), world)) for rank, world in
             enumerate(worlds)]
    ranks[finished:] = [replace(r, end=None) for r in ranks[finished:]]
    accumulated = analyze.RoundAccumulator()
    for rank in ranks:
        accumulated.add(rank)
    result = outcome.RoundResult(str(case.name), rnd.index, rnd.dir, status="failed")
    outcome.classify(case, rnd, result, "done" if finished == 2 else "node_failed", ranks, accumulated)
    assert result.status == status
    said = {(1, 1): "ranks 0, 1 reported world_size 1", (2, 1): "rank 1 reported world_size 1"}.get(worlds)
    expected = (f"the launch did not start the planned layout: {said}, but the plan asks for 2 (1 node(s) x 2 "
                "process(es))")
    if status == "ok":
        assert result.metrics is not None and not any("planned layout" in w for w in result.warnings)
    elif finished == 2:
        assert result.reason.startswith(expected) and result.metrics is None
    else:
        assert any(w.startswith(expected) for w in result.warnings) and "planned layout" not in result.reason


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 MiB tmpfs: far less than the 1 GiB a run's preflight asks for."""
    with tmpfs(tmp_path / "tiny-disk", "64m") as mount_point:
        yield mount_point


def test_a_log_root_without_room_is_refused_before_anything_starts(cli, tiny_disk):
    log_root = tiny_disk / "logs"
    result = cli("run", "gpt2_tiny:torch:cpu:1:1", *SHORT, log_root=log_root)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "host localhost: only 0.1 GiB free under" in result.stderr and "a run needs 1 GiB" in result.stderr
    assert "fix: free space there, or point the log root" in result.stderr and "Traceback" not in result.stderr
    assert not list(log_root.glob("*/*/round1/*/rank*.log"))  # nothing ran
    assert leftover_processes(log_root) == []


def test_the_installed_accelbench_command(tmp_path):
    """The console script setup.cfg installs, not ``python -m``: what a user types (its refusal of a bad case
    name: test_cli_imports.py's console-script test)."""
    command = Path(sys.executable).parent / "accelbench"
    assert command.is_file(), f"{command}: ./dev setup installs it (setup.cfg console_scripts)"
    env = {**os.environ, "TMPDIR": str(tmp_path), **ONE_THREAD}  # a lone rank's second thread only spins

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(command), *args], cwd=ROOT, capture_output=True, text=True, env=env,
                              timeout=300)

    usage = run("--help")
    assert usage.returncode == 0 and "usage: accelbench" in usage.stdout and "run" in usage.stdout
    listed = run("list")
    assert listed.returncode == 0 and "gpt2_tiny" in listed.stdout
    done = run("run", "gpt2_tiny:torch:cpu:1:1", *SHORT, "--log-root", str(tmp_path / "logs"))
    assert done.returncode == 0, done.stderr
    assert "gpt2_tiny:torch:cpu:1:1" in done.stdout and "ok" in done.stdout


def test_a_master_port_taken_at_start_is_retried_and_the_failed_attempt_kept(tmp_path):
    """The rendezvous port, free when the plan chose it, is taken by another process when the node starts
    (torch's store cannot listen: EADDRINUSE). The ranks never met, so this is a start error, not a result:
    the attempt's logs are kept aside, a start_error row is stored, and the round runs again, here once the
    port is free."""
    with socket.socket() as holder:
        # a port outside the ephemeral range, as a round's own (training/contract/ports.py): bind(0)'s, freed for
        # the retry, lies where the other lanes' outgoing connections draw theirs and could be taken again
        holder.bind(("127.0.0.1", ports.free_ports(1)[0]))
        holder.listen(1)
        port = holder.getsockname()[1]
        cluster = write(tmp_path / "cluster.yaml",
                        f"master_port: {port}\nhosts:\n  - {{name: n0, address: 127.0.0.1}}\n")
        orch = start(tmp_path, "gpt2_tiny:torch:cpu:1:1", *SHORT, "--cluster", str(cluster))
        deadline = time.monotonic() + 300  # a hang guard
        while not list(orch.log_root.glob("*/*/round1.start-error1")) and orch.process.poll() is None:
            assert time.monotonic() < deadline, orch.stderr()[-3000:]
            time.sleep(0.05)
    assert orch.wait(300) == 0, orch.stderr()[-3000:]  # the port is free again: the retry ran the round
    (doc_path,) = orch.log_root.glob("*/*/round1/results.json")
    doc = json.loads(doc_path.read_text())
    assert doc["status"] == "ok"
    (note,) = [w for w in doc["warnings"] if w.startswith("attempt 1 did not start")]
    assert "EADDRINUSE" in note and "retried" in note
    kept = next(orch.log_root.glob("*/*/round1.start-error1"))
    assert "EADDRINUSE" in json.loads((kept / "results.json").read_text())["error_lines"][-1]
    from run_benchmarks.results.store.store import ResultStore

    with ResultStore(orch.log_root / "results.db") as store:
        statuses = [a["status"] for a in store.attempts()]
    assert statuses[0] == "start_error" and statuses[-1] == "ok"


@pytest.mark.parametrize("text, oom", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory", True),
    # Paddle's allocator on a CPU (the forced OOM of the finetune table's tiny twin) and on a GPU
    ("MemoryError: (ResourceExhausted) Fail to alloc memory of 1125899906842624 size, error code is 12.", True),
    ("ResourceExhaustedError: \n\nOut of memory error on GPU 0. Cannot allocate 1.2GB memory on GPU 0", True),
    ("Slurm job 7 ended OUT_OF_MEMORY (out of memory)", True),
    ("RuntimeError: stack expects each tensor to be equal size", False),
])
def test_every_frameworks_out_of_memory_words_are_an_oom(text, oom):
    from run_benchmarks.execute.outcome import is_out_of_memory

    assert is_out_of_memory(text) is oom

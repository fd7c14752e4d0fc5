"""Real runs of gpt2_tiny through the CLI: torchrun, gloo, worker processes, logs, results."""
from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .conftest import ROOT, write
from run_benchmarks.report.summary import number

SHORT = ("--set", "train.steps=8", "--set", "train.warmup_steps=2")


def leftover_processes(marker: Path) -> list[str]:
    """Processes whose command line mentions ``marker`` (a run's log root): there must be none after a run."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(marker) in part for part in proc.info["cmdline"] or ()):
                found.append(" ".join(proc.info["cmdline"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


def assert_complete_ok(doc: dict, world_size: int, steps: int, warmup: int, checkout: Path = ROOT,
                       in_image: bool = False) -> None:
    """A complete ok round; ``checkout``: the --root the run used (a test's copy is no git checkout);
    ``in_image``: the ranks ran in the vendor's image, whose Python is Debian's (same minor version as
    this machine's: the wheels downloaded here must install there)."""
    assert doc["status"] == "ok", doc["reason"]
    m = doc["metrics"]
    assert m["world_size"] == world_size
    assert m["measured_steps"] == steps - warmup and m["warmup_steps"] == warmup
    assert m["tokens_per_s_total"] > 0
    assert m["tokens_per_s_per_device"] == pytest.approx(m["tokens_per_s_total"] / world_size)
    assert m["tflops_per_device"] == pytest.approx(m["flops_per_token"] * m["tokens_per_s_per_device"] / 1e12)
    assert m["mfu"] is None and "no fp32 peak for cpu" in m["mfu_note"]
    assert m["peak_memory_bytes"]["max"] > 50 * 2**20 and m["memory_kind"] == "rss"
    assert 0 < m["step_time_s"]["min"] <= m["step_time_s"]["median"] <= m["step_time_s"]["max"]
    env = doc["environment"]
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert env["orchestrator"]["accelbench_commit"] == (head.stdout.strip() if head.returncode == 0
                                                        else "unknown (not a git checkout)")
    node_env = env["nodes"][0]["environment"]  # every node here is this machine: its facts are known
    assert node_env["hostname"] == socket.gethostname() and node_env["cpu_count"] == os.cpu_count()
    python = platform.python_version()
    assert (node_env["python"].rsplit(".", 1)[0] == python.rsplit(".", 1)[0] if in_image
            else node_env["python"] == python) and "Linux" in node_env["os"]
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert f"model name\t: {node_env['cpu_model']}\n" in cpuinfo
    assert node_env["torch"] == torch_version()


def test_two_process_run_end_to_end(cli):
    # Its wall time (goal: under 60 s) is a benchmark, recorded in docs/benchmarks.md, not asserted here.
    result = cli("--case_name", "gpt2_tiny:torch_2.13:cpu:1:2", entry="start_task")
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert_complete_ok(doc, world_size=2, steps=30, warmup=5)
    round_dir = result.run_dirs()[0] / "gpt2_tiny-torch_2.13-cpu-1x2" / "round1"
    node_dir = round_dir / "localhost_noderank0"
    for rank in (0, 1):
        assert "ACCELBENCH_PERF" in (node_dir / f"rank{rank}.stdout.log").read_text()
        assert (node_dir / f"rank{rank}.stderr.log").is_file()
    assert (round_dir / "config.json").is_file() and (round_dir / "resolved.yaml").is_file()
    assert "tokens/s/device" in result.stdout and "gpt2_tiny:torch_2.13:cpu:1:2" in result.stdout
    assert "MFU n/a: no fp32 peak for cpu" in result.stdout
    # Launchers and compilers wrote nothing into the system temp dir.
    assert list(cli.system_tmp.iterdir()) == []
    assert leftover_processes(result.log_root) == []


def test_one_process_run(cli):
    result = cli("run", "gpt2_tiny:torch:cpu:1:1", *SHORT)
    assert result.returncode == 0, result.stderr
    (doc,) = result.results()
    assert_complete_ok(doc, world_size=1, steps=8, warmup=2)
    summary = json.loads((result.run_dirs()[0] / "summary.json").read_text())
    assert summary["rounds"][0]["status"] == "ok"
    (node,) = doc["environment"]["nodes"]
    assert node["probes"]["host_kernel"] == platform.release()  # the vendor's probes, run before the round
    assert "Model name" in node["probes"]["cpu_model"]  # lscpu (util-linux: on every Debian)
    assert "cpu_governor" in node["probes"] and node["image"] is None  # no container here
    m = doc["metrics"]
    assert m["init_time_s"] > 0 and m["first_step_time_s"] > 0 and doc["wall_time_s"] > m["init_time_s"]
    assert m["samples_per_s"] == pytest.approx(m["tokens_per_s_total"] / 128)  # gpt2_tiny: seq_len 128


def test_repeat_rounds_and_two_nodes_on_this_machine(cli, root):
    # Two "hosts" that are both this machine: two torchrun launchers meet by static rendezvous.
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: n0}\n  - {name: n1}\n")
    for folder in ("training",):
        os.symlink(ROOT / folder, root / folder)
    result = cli("run", "gpt2_tiny:torch:cpu:2:1:2", "--root", str(root), *SHORT)
    assert result.returncode == 0, result.stderr + result.stdout
    docs = result.results()
    assert [d["round"] for d in docs] == [1, 2]
    for doc in docs:
        assert_complete_ok(doc, world_size=2, steps=8, warmup=2, checkout=root)
        assert [n["host"] for n in doc["environment"]["nodes"]] == ["n0", "n1"]
    assert "2 ok" in result.stdout  # the end-of-run table is the report's: one row per workload
    rows = result.attempts()
    assert [(r["round"], r["status"], r["nnodes"]) for r in rows] == [(1, "ok", 2), (2, "ok", 2)]
    for row, doc in zip(rows, docs):
        assert row["tokens_per_s_per_device"] == doc["metrics"]["tokens_per_s_per_device"]
        assert len(row["metrics"]["tokens_per_s_per_node"]) == 2  # one figure per node
        assert sum(row["metrics"]["tokens_per_s_per_node"]) == pytest.approx(row["tokens_per_s_total"])
    report = cli("report", "--db", str(result.log_root / "results.db"), "--format", "markdown")
    assert report.returncode == 0, report.stderr
    assert "| gpt2_tiny | torch | 2x1 cpu |" in report.stdout


def test_crashing_worker_fails_the_case_and_keeps_the_logs(cli):
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "debug.fail_at_step=4",
                 "--set", "debug.fail_rank=1")
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "failed" and doc["metrics"] is None
    assert "node 0 (localhost) exited with 1" in doc["reason"]
    assert any("InjectedFailure: injected failure on rank 1 at step 4" in line for line in doc["error_lines"])
    assert "injected failure on rank 1 at step 4" in result.stdout  # the table shows why
    node_dir = result.run_dirs()[0] / "gpt2_tiny-torch-cpu-1x2" / "round1" / "localhost_noderank0"
    assert "Traceback" in (node_dir / "rank1.stderr.log").read_text()
    assert '"step":3' in (node_dir / "rank0.stdout.log").read_text()  # what ran before the crash is kept
    (row,) = result.attempts()  # the failure is a row too
    assert row["status"] == "failed" and row["reason"] == doc["reason"] and row["tokens_per_s_per_device"] is None
    assert leftover_processes(result.log_root) == []


def test_hang_past_the_deadline_is_a_timeout_and_nothing_is_left_running(cli):
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "debug.hang_at_step=3", "--timeout", "25")
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 25 s passed" in doc["reason"]
    assert leftover_processes(result.log_root) == []


def test_ctrl_c_stops_the_workers_and_records_interrupted(tmp_path):
    log_root = tmp_path / "logs"
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", "gpt2_tiny:torch:cpu:1:2", "--log-root",
            str(log_root), "--set", "train.steps=100000", "--set", "train.warmup_steps=1"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # wait until training is under way
        logs = list(log_root.glob("*/*/round1/*/torchrun/*/attempt_0/0/stdout.log"))
        if logs and '"kind":"step"' in logs[0].read_text():
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("training never started")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    (doc_path,) = log_root.glob("*/*/round1/results.json")
    doc = json.loads(doc_path.read_text())
    assert doc["status"] == "interrupted"
    assert doc["steps_completed"] >= 1
    from run_benchmarks.store import ResultStore

    with ResultStore(log_root / "results.db") as store:
        assert [a["status"] for a in store.attempts()] == ["interrupted"]
        assert store.runs()[0]["status"] == "interrupted"
    assert "Traceback" not in stderr
    assert leftover_processes(log_root) == []


def test_dry_run_prints_the_plan_and_starts_nothing(cli):
    result = cli("run", "gpt2_tiny:torch_2.13:cpu:1:2", "--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for fragment in ("dry run: nothing is started", "node 0 on host localhost", "torch.distributed.run",
                     "--nproc-per-node=2", "env TMPDIR=", "launcher.log", "rank<N>.stdout.log"):
        assert fragment in out, fragment
    assert not result.log_root.exists()


def test_list_shows_cases_vendors_and_hardware(cli):
    result = cli("list")
    assert result.returncode == 0
    for fragment in ("gpt2_tiny", "gpt2_s", "cpu", "nvidia", "H100", "989.5", "torch"):
        assert fragment in result.stdout


@pytest.mark.parametrize("args, fragments", [
    (("gpt2_tiny:torch:cpu:1",), ["has 4 field(s)", "fix:"]),
    (("gpt2_tiny:torch:cpu:0:2",), ["nnodes must be at least 1"]),
    (("gpt2_tiny:torch:cpu:x:2",), ["nnodes must be a whole number"]),
    (("nope:torch:cpu:1:1",), ["unknown case 'nope'"]),
    (("gpt2_tiny:mxnet:cpu:1:1",), ["unknown framework 'mxnet'"]),
    (("gpt2_tiny:torch:gpu9:1:1",), ["unknown hardware 'gpu9'"]),
    (("gpt2_tiny:torch:cpu:3:1",), ["asks for 3 nodes", "lists 1 host(s)"]),
    (("gpt2_tiny:torch_1.9:cpu:1:1",), ["asks for torch 1.9 but", "--allow-version-mismatch"]),
    (("gpt2_tiny:torch:cpu:1:1", "--set", "train.steps=zero"), ["train.steps:", "got 'zero'"]),
    (("gpt2_tiny:torch:cpu:1:1", "--cluster", "/nonexistent/cluster.yaml"), ["cluster.yaml: file not found"]),
    (("gpt2_tiny:torch:cpu:1:1", "--set", "data.source=tokens", "--set", "data.path=missing/corpus"),
     ["data.path (set in --set data.path=missing/corpus)", "missing/corpus_ids.npy", "not found"]),
    (("gpt2_tiny:torch:A100:1:64",), ["host localhost: no device-count command of accelerator kind 'nvidia' ran: "
                                      "nvidia-smi -L"]),
    (("llama_tiny_lora:torch:cpu:1:2", "--set", "parallel.tensor_parallel_degree=2"),
     ["LoRA adapters are not split by tensor parallelism"]),
])
def test_bad_input_exits_2_with_one_message_and_starts_nothing(cli, args, fragments):
    result = cli("run", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("accelbench: error:")
    for fragment in fragments:
        assert fragment in result.stderr
    assert not result.log_root.exists()


def test_version_mismatch_can_be_overridden_and_is_recorded(cli):
    result = cli("run", "gpt2_tiny:torch_1.9:cpu:1:1", "--allow-version-mismatch", "--set", "train.steps=3",
                 "--set", "train.warmup_steps=1")
    assert result.returncode == 0, result.stderr
    (doc,) = result.results()
    assert doc["status"] == "ok"
    assert any("asks for torch 1.9" in w and "--allow-version-mismatch" in w for w in doc["warnings"])


def test_every_tiny_family_trains_in_one_run(cli):
    names = [f"{family}_tiny:torch:cpu:1:2" for family in ("gpt3", "llama", "opt", "bloom")]
    result = cli("run", *names, "--set", "train.steps=10", "--set", "train.warmup_steps=2")
    assert result.returncode == 0, result.stderr + result.stdout
    docs = result.results()
    assert sorted(d["case"]["case"] for d in docs) == ["bloom_tiny", "gpt3_tiny", "llama_tiny", "opt_tiny"]
    for doc in docs:
        assert_complete_ok(doc, world_size=2, steps=10, warmup=2)


def test_pretraining_reads_a_megatron_mmap_token_dataset(cli, tmp_path):
    made = subprocess.run([sys.executable, "-m", "training.data.make_dataset", "tokens", "--prefix", "corpus/web",
                           "--vocab-size", "1024", "--documents", "300"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert made.returncode == 0, made.stderr
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "data.source=tokens",
                 "--set", "data.path=corpus/web")  # relative to where accelbench is started
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert_complete_ok(doc, world_size=2, steps=8, warmup=2)
    assert doc["workload"]["data"]["path"] == str(tmp_path / "corpus" / "web")
    stdout = next(result.run_dirs()[0].glob("*/round1/*/rank0.stdout.log")).read_text()
    start = json.loads(next(line for line in stdout.splitlines() if '"kind":"start"' in line).split(" ", 1)[1])
    assert start["data"]["source"] == "tokens" and start["data"]["documents"] == 300


def test_lora_finetune_trains_adapters_and_reports_tokens_without_padding(cli):
    result = cli("run", "llama_tiny_lora:torch:cpu:1:2", "--set", "train.steps=5", "--set", "train.warmup_steps=1")
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok", doc["reason"]
    m = doc["metrics"]
    assert m["trainable_params"] == 2 * 8 * ((128 + 128) + (128 + 64))  # rank 8 on q and v (GQA) of 2 blocks
    assert m["n_params"] > 50 * m["trainable_params"]  # 1.5 % of the tiny model trains
    assert 0 < m["effective_tokens_per_s_per_device"] < m["tokens_per_s_per_device"]
    # the end-of-run table gets the effective column only where a round pads
    assert "(no padding)" in result.stdout  # the header of "effective tokens/s/device (no padding)"
    assert number(m["effective_tokens_per_s_per_device"]) in result.stdout
    assert doc["workload"]["task"] == "lora"


def test_fp8_where_the_device_cannot_is_recorded_as_unsupported(cli):
    refused = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "train.precision=fp8")
    assert refused.returncode == 2 and "set train.compile" in refused.stderr  # fp8 is measured compiled only
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "train.precision=fp8",
                 "--set", "train.compile=default")
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "unsupported"
    assert doc["reason"] == ("not supported on this device: fp8 training needs an accelerator of compute "
                             "capability 8.9+; this run is on cpu")
    assert "unsupported" in result.stdout and "Traceback" not in result.stderr


def test_out_of_memory_on_one_rank_ends_the_case_as_oom(cli):
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "debug.oom_at_step=3",
                 "--set", "debug.fail_rank=1")
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "oom" and doc["reason"].startswith("out of memory: ")
    assert any("can't allocate memory" in line for line in doc["error_lines"])
    assert doc["steps_completed"] == 3  # the steps before it are kept
    assert leftover_processes(result.log_root) == []


@pytest.mark.parametrize("layout", [("parallel.sharding=stage2",),
                                    ("parallel.pipeline_parallel_degree=2", "train.gradient_accumulation_steps=2")])
def test_fp16_loss_scaling_trains_with_sharded_gradients(cli, layout):
    """Every rank's scaler must agree on overflow (sharded or staged gradients), or ranks diverge or stall."""
    args = [a for setting in layout for a in ("--set", setting)]
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "train.precision=fp16", *args)
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["metrics"]["precision"] == "fp16"
    assert doc["metrics"]["loss_last"] < doc["metrics"]["loss_first"]

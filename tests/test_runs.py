"""Real runs of the tiny models through the CLI: torchrun, gloo, worker processes, logs, results.

Most tests read the session's golden runs (tests/goldens.py): one invocation holds many cases, each
checked here by what it must show.
"""
from __future__ import annotations

import json
import platform

import pytest

from run_benchmarks.results.report.summary import number

from .checks import assert_complete_ok, leftover_processes
from .goldens import SHORT, SHORT_STEPS, SHORT_WARMUP


def test_two_process_run_end_to_end(golden_default):
    # Its wall time (goal: under 60 s) is a benchmark, recorded in docs/benchmarks.md, not asserted here.
    result = golden_default.result
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
    assert list(golden_default.system_tmp.iterdir()) == []
    assert leftover_processes(result.log_root) == []


def test_one_process_run(golden_local):
    doc = golden_local.doc("opt_tiny:torch:cpu:1:1")
    assert_complete_ok(doc, world_size=1, steps=SHORT_STEPS, warmup=SHORT_WARMUP)
    summary = json.loads((golden_local.run_dir() / "summary.json").read_text())
    assert [r["status"] for r in summary["rounds"] if r["case_name"] == doc["case_name"]] == ["ok"]
    assert len(summary["rounds"]) == len(golden_local.docs())  # every round of every case, in one summary
    (node,) = doc["environment"]["nodes"]
    assert node["probes"]["host_kernel"] == platform.release()  # the vendor's probes, run before the round
    assert "Model name" in node["probes"]["cpu_model"]  # lscpu (util-linux: on every Debian)
    assert "cpu_governor" in node["probes"] and node["image"] is None  # no container here
    m = doc["metrics"]
    assert m["init_time_s"] > 0 and m["first_step_time_s"] > 0 and doc["wall_time_s"] > m["init_time_s"]
    assert m["samples_per_s"] == pytest.approx(m["tokens_per_s_total"] / 128)  # opt_tiny: seq_len 128


def test_repeat_rounds_and_two_nodes_on_this_machine(golden_two_nodes, accelbench):
    # Two "hosts" that are both this machine: two torchrun launchers meet by static rendezvous.
    result = golden_two_nodes.result
    docs = [d for d in golden_two_nodes.docs() if d["case"]["case"] == "gpt2_tiny"]
    assert [d["round"] for d in docs] == [1, 2]
    for doc in docs:
        assert_complete_ok(doc, world_size=2, steps=SHORT_STEPS, warmup=SHORT_WARMUP,
                           checkout=golden_two_nodes.workdir / "root")
        assert [n["host"] for n in doc["environment"]["nodes"]] == ["n0", "n1"]
        # each round's own port, chosen on the master host (n0) when the round started, recorded with it
        assert doc["environment"]["rendezvous"]["chosen_by"].startswith("auto, chosen on host n0 (")
    assert "2 ok" in result.stdout  # the end-of-run table is the report's: one row per workload
    rows = [r for r in golden_two_nodes.attempts() if r["case"] == "gpt2_tiny"]
    assert [(r["round"], r["status"], r["nnodes"]) for r in rows] == [(1, "ok", 2), (2, "ok", 2)]
    for row, doc in zip(rows, docs):
        assert row["tokens_per_s_per_device"] == doc["metrics"]["tokens_per_s_per_device"]
        assert len(row["metrics"]["tokens_per_s_per_node"]) == 2  # one figure per node
        assert sum(row["metrics"]["tokens_per_s_per_node"]) == pytest.approx(row["tokens_per_s_total"])
    report = accelbench("report", "--db", str(golden_two_nodes.db), "--format", "markdown")
    assert report.returncode == 0, report.stderr
    assert "| gpt2_tiny | torch | 2x1 cpu |" in report.stdout


def test_crashing_worker_fails_the_case_and_keeps_the_logs(golden_failures):
    result = golden_failures.result
    assert result.returncode == 1
    doc = golden_failures.doc("gpt2_tiny:torch:cpu:1:2", **{"debug.fail_at_step": 4})
    assert doc["status"] == "failed" and doc["metrics"] is None
    assert "node 0 (localhost) exited with 1" in doc["reason"]
    assert any("InjectedFailure: injected failure on rank 1 at step 4" in line for line in doc["error_lines"])
    assert "injected failure on rank 1 at step 4" in result.stdout  # the table shows why
    node_dir = golden_failures.node_dir(doc)
    assert "Traceback" in (node_dir / "rank1.stderr.log").read_text()
    assert '"step":3' in (node_dir / "rank0.stdout.log").read_text()  # what ran before the crash is kept
    (row,) = [r for r in golden_failures.attempts() if r["results_path"] == doc["results_path"]]  # a row too
    assert row["status"] == "failed" and row["reason"] == doc["reason"] and row["tokens_per_s_per_device"] is None
    assert leftover_processes(result.log_root) == []


def test_hang_past_the_deadline_is_a_timeout_and_nothing_is_left_running(cli):
    # The hang starts at the first step, so the deadline is all the test waits for (a few seconds).
    result = cli("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "debug.hang_at_step=0", "--timeout", "8")
    assert result.returncode == 1
    (doc,) = result.results()
    assert doc["status"] == "timeout" and "deadline of 8 s passed" in doc["reason"]
    assert leftover_processes(result.log_root) == []


def test_dry_run_prints_the_plan_and_starts_nothing(accelbench):
    result = accelbench("run", "gpt2_tiny:torch_2.13:cpu:1:2", "--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for fragment in ("dry run: nothing is started", "node 0 on host localhost", "torch.distributed.run",
                     "--nproc-per-node=2", "env TMPDIR=", "launcher.log", "rank<N>.stdout.log"):
        assert fragment in out, fragment
    assert not result.log_root.exists()


def test_list_shows_cases_vendors_and_hardware(accelbench):
    result = accelbench("list")
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
def test_bad_input_exits_2_with_one_message_and_starts_nothing(accelbench, args, fragments):
    result = accelbench("run", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("accelbench: error:")
    for fragment in fragments:
        assert fragment in result.stderr
    assert not result.log_root.exists()


def test_version_mismatch_can_be_overridden_and_is_recorded(golden_local):
    doc = golden_local.doc("gpt3_tiny:torch_1.9:cpu:1:1")
    assert doc["status"] == "ok"
    assert any("asks for torch 1.9" in w and "--allow-version-mismatch" in w for w in doc["warnings"])


def test_every_tiny_family_trains_in_one_run(golden_local):
    """Each family through the real launcher in one process (llama and bloom: test_parity.py's references, under
    torchrun as planned by the orchestrator; 2 ranks of their modules: see LOCAL_OK)."""
    for case in ("gpt3_tiny:torch_1.9", "opt_tiny:torch"):
        doc = golden_local.doc(f"{case}:cpu:1:1")
        assert_complete_ok(doc, world_size=1, steps=SHORT_STEPS, warmup=SHORT_WARMUP)
        assert doc["workload"]["model"]["family"] == case.split("_")[0]


def test_pretraining_reads_a_megatron_mmap_token_dataset(golden_local):
    # The golden made corpus/web with training.data.make_dataset and named it relative to where it started.
    doc = golden_local.doc("opt_tiny:torch:cpu:1:1", **{"data.source": "tokens"})
    assert_complete_ok(doc, world_size=1, steps=SHORT_STEPS, warmup=SHORT_WARMUP)
    assert doc["workload"]["data"]["path"] == str(golden_local.workdir / "corpus" / "web")
    stdout = (golden_local.node_dir(doc) / "rank0.stdout.log").read_text()
    start = json.loads(next(line for line in stdout.splitlines() if '"kind":"start"' in line).split(" ", 1)[1])
    assert start["data"]["source"] == "tokens" and start["data"]["documents"] == 300


def test_lora_finetune_trains_adapters_and_reports_tokens_without_padding(golden_local):
    result = golden_local.result
    doc = golden_local.doc("llama_tiny_lora:torch:cpu:1:1")
    assert doc["status"] == "ok", doc["reason"]
    m = doc["metrics"]
    assert m["trainable_params"] == 2 * 8 * ((128 + 128) + (128 + 64))  # rank 8 on q and v (GQA) of 2 blocks
    assert m["n_params"] > 50 * m["trainable_params"]  # 1.5 % of the tiny model trains
    assert 0 < m["effective_tokens_per_s_per_device"] < m["tokens_per_s_per_device"]
    # the end-of-run table gets the effective column only where a round pads
    assert "(no padding)" in result.stdout  # the header of "effective tokens/s/device (no padding)"
    assert number(m["effective_tokens_per_s_per_device"]) in result.stdout
    assert doc["workload"]["task"] == "lora"


def test_fp8_where_the_device_cannot_is_recorded_as_unsupported(accelbench, golden_failures):
    refused = accelbench("run", "gpt2_tiny:torch:cpu:1:2", *SHORT, "--set", "train.precision=fp8")
    assert refused.returncode == 2 and "set train.compile" in refused.stderr  # fp8 is measured compiled only
    result = golden_failures.result
    doc = golden_failures.doc("gpt2_tiny:torch:cpu:1:1", **{"train.precision": "fp8"})
    assert doc["status"] == "unsupported"
    assert doc["reason"] == ("not supported on this device: fp8 training needs an accelerator of compute "
                             "capability 8.9+; this run is on cpu")
    assert "unsupported" in result.stdout and "Traceback" not in result.stderr


def test_out_of_memory_on_one_rank_ends_the_case_as_oom(golden_failures):
    doc = golden_failures.doc("gpt2_tiny:torch:cpu:1:2", **{"debug.oom_at_step": 3})
    assert doc["status"] == "oom" and doc["reason"].startswith("out of memory: ")
    assert any("can't allocate memory" in line for line in doc["error_lines"])
    assert doc["steps_completed"] == 3  # the steps before it are kept
    assert leftover_processes(golden_failures.log_root) == []


@pytest.mark.parametrize("layout", [{"parallel.sharding": "stage2"}, {"parallel.pipeline_parallel_degree": 2}])
def test_fp16_loss_scaling_trains_with_sharded_gradients(golden_local, layout):
    """Every rank's scaler must agree on overflow (sharded or staged gradients), or ranks diverge or stall."""
    doc = golden_local.doc("gpt2_tiny:torch:cpu:1:2", **{"train.precision": "fp16", **layout})
    assert doc["status"] == "ok" and doc["metrics"]["precision"] == "fp16"
    assert doc["metrics"]["loss_last"] < doc["metrics"]["loss_first"]

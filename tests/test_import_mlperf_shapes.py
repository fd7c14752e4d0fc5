"""``accelbench import --format mllog`` of the structures real MLPerf submissions log (issue 30).

Each log is built here with the structure of one kind of submission, never copied from one: NeMo's GPT-3
(block sizes and the total trained counted in tokens, in ``epoch_count`` and ``train_samples``), Habana's
GPT-3 (one block spanning every evaluation, its ``epoch_count`` the evaluation interval), BERT (one block,
the log's own ``tracked_stats`` throughput over its steps), NeMo's Llama 3.1 405B (``block_stop`` repeating
its start's ``samples_count``, per-step ``tracked_stats``), Llama 2 70B LoRA (no sequence length in the log).
Every figure is asserted against the arithmetic done here on the numbers written.
"""
from __future__ import annotations

import csv
import io
import json

import pytest

from .test_importers import mllog, stored

GIB = 2**30


def sysjson(nodes: int, per_node: int, accelerator: str) -> str:
    return ":::SYSJSON " + json.dumps({"submitter": "X", "number_of_nodes": str(nodes),
                                       "accelerators_per_node": str(per_node),
                                       "accelerator_model_name": accelerator}) + "\n"


def run(accelbench, db, log, run_id: str, *extra: str):
    return accelbench("import", str(log), "--format", "mllog", "--run-id", run_id, "--db", str(db), *extra)


# ---------------------------------------------------------------- GPT-3: token-counted blocks

G3, S3 = 2304, 2048
BLOCK = G3 * S3 * 11  # tokens: 11 steps of 2304 sequences of 2048 tokens
SECONDS = (130.0, 120.0, 121.0, 119.0)  # the first block is warm-up


def nemo_gpt3(schedule: bool = True) -> str:
    text = sysjson(64, 8, "NVIDIA H100-SXM5-80GB") + mllog("submission_benchmark", 0, "gpt3")
    text += mllog("global_batch_size", 0, G3) + mllog("max_sequence_length", 0, S3)
    if schedule:
        text += mllog("opt_learning_rate_decay_steps", 0, 72400)
    text += mllog("run_start", 10, event_type="INTERVAL_START")
    t = 11.0
    for k, seconds in enumerate(SECONDS):
        text += mllog("block_start", t, event_type="INTERVAL_START", first_epoch_num=k * BLOCK, epoch_count=BLOCK)
        text += mllog("block_stop", t + seconds, event_type="INTERVAL_END", first_epoch_num=k * BLOCK,
                      epoch_count=BLOCK)
        text += mllog("eval_start", t + seconds, epoch_num=(k + 1) * BLOCK)
        text += mllog("eval_accuracy", t + seconds + 10, 2.75 - 0.01 * k, epoch_num=(k + 1) * BLOCK)
        text += mllog("eval_stop", t + seconds + 10, epoch_num=(k + 1) * BLOCK)
        t += seconds + 10
    return (text + mllog("run_stop", t, status="success") + mllog("trained_samples", t, len(SECONDS) * BLOCK)
            + mllog("train_samples", t, len(SECONDS) * BLOCK))


def test_nemo_gpt3_blocks_count_tokens_and_give_the_sources_throughput(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(nemo_gpt3())
    done = run(accelbench, db, log, "gpt3")  # no case: the log's model, hardware and layout (SYSJSON)
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "gpt3")
    tokens = 3 * BLOCK / (120.0 + 121.0 + 119.0)
    assert row["status"] == "ok" and (row["case"], row["framework"], row["hardware"]) == ("gpt3", "mllog",
                                                                                            "NVIDIA_H100-SXM5-80GB")
    assert (row["nnodes"], row["nprocs_per_node"], row["world_size"]) == (64, 8, 512)
    assert row["tokens_per_s_total"] == pytest.approx(tokens, rel=1e-12)
    assert row["tokens_per_s_per_device"] == pytest.approx(tokens / 512, rel=1e-12)  # ~845, not 2e15
    assert row["samples_per_s"] == pytest.approx(tokens / S3, rel=1e-12)
    assert row["tflops_per_device"] is None and row["mfu"] is None  # no case: no FLOPs of accelbench's
    sources = row["metrics"]["sources"]
    assert sources["tokens_per_s_total"].startswith("derived from the log's blocks (3 of 4): epoch_num, "
                                                    "first_epoch_num (tokens) at each block's start and end")
    assert sources["samples_per_s"].endswith("/ max_sequence_length 2,048 (log)")
    assert any(w.startswith("no case named: only the log's own figures") for w in row["warnings"])

    done = run(accelbench, db, log, "gpt3-case", "--case-name", "gpt2_175b:torch:H100:64:8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "gpt3-case")
    per_device = tokens / 512
    assert row["tflops_per_device"] == pytest.approx(row["metrics"]["flops_per_token"] * per_device / 1e12)
    assert row["metrics"]["sources"]["tflops_per_device"].startswith("case gpt2_175b: ")


def test_gpt3_blocks_count_tokens_by_the_benchmark_table_with_no_schedule_to_infer_it_from(accelbench, tmp_path):
    """Before the benchmark table the unit was inferred from the learning-rate schedule, and a log without one was
    refused as ambiguous; GPT-3's positions count tokens by its row (mlperf_benchmarks.yaml), schedule or not."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(nemo_gpt3(schedule=False))
    done = run(accelbench, db, log, "table", "--case-name", "gpt2_175b:torch:H100:64:8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "table")
    assert row["tokens_per_s_total"] == pytest.approx(3 * BLOCK / (120.0 + 121.0 + 119.0), rel=1e-12)
    assert row["metrics"]["time_to_train_s"] > 0 and row["metrics"]["eval_accuracy"] == pytest.approx(2.72)


def test_habana_one_block_spanning_its_evaluations_counts_evaluations_times_the_interval(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    g = s = 2048
    interval = g * s * 12
    text = mllog("submission_benchmark", 0, "gpt3") + mllog("global_batch_size", 0, g)
    text += mllog("max_sequence_length", 0, s) + mllog("run_start", 1, event_type="INTERVAL_START")
    text += mllog("block_start", 2, event_type="INTERVAL_START", first_epoch_num=0, epoch_count=interval)
    t = 2.0
    for k in range(5):
        t += 100.0
        text += mllog("eval_start", t, epoch_num=(k + 1) * interval)
        text += mllog("eval_accuracy", t + 15, 2.8 - 0.02 * k, epoch_num=(k + 1) * interval)
        text += mllog("eval_stop", t + 15, epoch_num=(k + 1) * interval)
        t += 15
    text += mllog("train_samples", t, 5 * interval) + mllog("block_stop", t, event_type="INTERVAL_END",
                                                             first_epoch_num=0)
    log.write_text(text + mllog("run_stop", t + 1, status="success"))
    done = run(accelbench, db, log, "habana", "--nnodes", "128", "--nprocs-per-node", "8", "--hardware", "Gaudi2")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "habana")
    assert row["tokens_per_s_total"] == pytest.approx(5 * interval / 500.0, rel=1e-12)  # the evaluations' 75 s out
    assert row["tokens_per_s_per_device"] == pytest.approx(5 * interval / 500.0 / 1024, rel=1e-12)
    assert "the last at train_samples, the run's total" in row["metrics"]["sources"]["tokens_per_s_total"]
    warnings = "\n".join(row["warnings"])
    assert "the log has 1 block(s): kept whole, its warm-up inside" in warnings
    assert "their 5 evaluations' 75.0 s left out of the training time" in warnings


def test_bert_one_block_gives_the_headline_and_the_logs_tracked_stats_sits_beside_it(accelbench, tmp_path):
    """BERT's epoch_num counts samples and its one block ends where train_samples, logged after training, says.
    tracked_stats' throughput is the submitter's own (the rules do not define it: RetinaNet logs it per device in
    one round and as the total in the next), so it is kept beside the blocks' figure where the two agree, never
    the headline (before issue 40 this log's headline was tracked_stats)."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    g, steps = 4608, 652
    text = mllog("submission_benchmark", 0, "bert") + mllog("global_batch_size", 0, g)
    text += mllog("opt_learning_rate_training_steps", 0, 700) + mllog("run_start", 1, event_type="INTERVAL_START")
    text += mllog("block_start", 1, event_type="INTERVAL_START", first_epoch_num=1, epoch_count=1)
    for k in range(1, 5):
        text += mllog("eval_accuracy", 1 + 12 * k, 0.70 + 0.005 * k, epoch_num=k * steps * g // 4)
    text += mllog("block_stop", 51, event_type="INTERVAL_END", first_epoch_num=1)
    text += mllog("train_samples", 51, steps * g) + mllog("run_stop", 51, status="success")
    log.write_text(text + mllog("tracked_stats", 51, {"throughput": 60123.5, "epoch_num": steps * g}, step=[2, steps]))
    done = run(accelbench, db, log, "bert", "--nnodes", "8", "--nprocs-per-node", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "bert")
    assert row["status"] == "ok" and row["case"] == "bert"
    assert row["samples_per_s"] == pytest.approx(steps * g / 50.0, rel=1e-12)
    metrics = row["metrics"]
    assert metrics["samples_per_s_logged"] == 60123.5
    assert metrics["sources"]["samples_per_s_logged"] == "log: tracked_stats throughput, mean of 1"
    assert "the last at train_samples, the run's total" in metrics["sources"]["samples_per_s"]
    assert row["tokens_per_s_total"] is None  # BERT: the log states no length a case does not give
    assert metrics["eval_accuracy"] == pytest.approx(0.72) and metrics["time_to_train_s"] == 50


# ---------------------------------------------------------------- Llama 3.1 405B and LoRA: samples_count blocks

def nemo_405b() -> str:
    g, s = 1152, 8192
    text = mllog("submission_benchmark", 0, "llama31_405b") + mllog("global_batch_size", 0, g)
    text += mllog("max_sequence_length", 0, s)
    text += mllog("train_samples", 0, 1574207408) + mllog("run_start", 1, event_type="INTERVAL_START")
    t, count = 1.0, 0
    for k, step_times in enumerate(((60.0, 50.0), (55.0, 56.0), (54.0, 58.0))):
        text += mllog("block_start", t, event_type="INTERVAL_START", samples_count=count)
        for i, seconds in enumerate(step_times):
            t += seconds
            text += mllog("tracked_stats", t, {"train_step_time": seconds, "reduced_train_loss": 7.0 - k - 0.1 * i},
                          step=count + g * (i + 1))
        text += mllog("tracked_stats", t, {"throughput": 2 * g / sum(step_times), "train_step_time": 55.0,
                                           "max_memory_usage": 58.5 + k}, step=count)
        text += mllog("block_stop", t, event_type="INTERVAL_END", samples_count=count)  # the start's, again
        count += 2 * g
        text += mllog("eval_start", t, samples_count=count)
        text += mllog("tracked_stats", t + 5, {"validation_throughput": 99999.0}, step=count)
        text += mllog("eval_accuracy", t + 10, 7.5 - k, samples_count=count)
        text += mllog("eval_stop", t + 10, samples_count=count)
        t += 10
    return text + mllog("run_stop", t, samples_count=count, status="success")


def test_nemo_405b_blocks_end_at_the_next_samples_count_with_no_warning(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(nemo_405b())
    done = run(accelbench, db, log, "405b", "--nnodes", "64", "--nprocs-per-node", "8", "--model", "llama3.1 405B")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "405b")
    samples_per_s = 4 * 1152 / (111.0 + 112.0)  # blocks 2 and 3
    assert row["case"] == "llama3.1_405B" and row["samples_per_s"] == pytest.approx(samples_per_s, rel=1e-12)
    assert row["tokens_per_s_total"] == pytest.approx(samples_per_s * 8192, rel=1e-12)  # the log's length
    assert row["step_time_median_s"] == pytest.approx(55.5) and row["loss_last"] == pytest.approx(4.9)
    assert row["peak_memory_bytes"] == 60.5 * GIB and row["metrics"]["memory_kind"] == "max_memory_usage"
    metrics = row["metrics"]
    assert metrics["samples_per_s_logged"] == pytest.approx((2 * 1152 / 111.0 + 2 * 1152 / 112.0) / 2, rel=1e-12)
    assert "end at the position stated after their stop: the stop repeats or lacks it" in metrics["sources"][
        "samples_per_s"]
    assert not any("block" in w or "left out" in w for w in row["warnings"]), row["warnings"]


def lora_log() -> str:
    text = mllog("submission_benchmark", 0, "llama2_70b_lora") + mllog("global_batch_size", 0, 8)
    text += mllog("train_samples", 0, 3901) + mllog("run_start", 1, event_type="INTERVAL_START")
    t, count = 1.0, 0
    for k, (samples, seconds) in enumerate(((1536, 140.0), (384, 30.0), (384, 31.0))):
        text += mllog("block_start", t, event_type="INTERVAL_START", samples_count=count)
        text += mllog("tracked_stats", t + seconds, {"throughput": samples / seconds * 1.01}, step=count + samples)
        count += samples
        text += mllog("block_stop", t + seconds, event_type="INTERVAL_END", samples_count=count)
        text += mllog("eval_accuracy", t + seconds + 8, 0.94 - 0.005 * k, samples_count=count)
        t += seconds + 8
    return text + mllog("run_stop", t, samples_count=count, status="success")


def test_lora_tokens_take_the_cases_sequence_length_said_so_or_the_one_set(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(lora_log())
    done = run(accelbench, db, log, "lora", "--case-name", "llama_7b_lora:torch:H100:1:8")
    assert done.returncode == 0, done.stdout + done.stderr
    samples_per_s = 768 / 61.0
    row = stored(db, "lora")
    assert row["tokens_per_s_total"] == pytest.approx(samples_per_s * 1024, rel=1e-12)
    said = "sequence length 1,024 from case llama_7b_lora: the log states none"
    assert any(w.startswith(said) for w in row["warnings"]) and said in done.stderr
    assert row["metrics"]["sources"]["tokens_per_s_total"].startswith("assumption: samples/s x sequence length 1,024")
    shown = accelbench("show", "lora", "--db", str(db))
    assert "assumption: samples/s x sequence length 1,024 from case llama_7b_lora" in shown.stdout

    done = run(accelbench, db, log, "lora-8k", "--case-name", "llama_7b_lora:torch:H100:1:8",
               "--set", "model.seq_len=8192")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "lora-8k")
    assert row["tokens_per_s_total"] == pytest.approx(samples_per_s * 8192, rel=1e-12)
    assert "from --set model.seq_len=8192" in row["metrics"]["sources"]["tokens_per_s_total"]


def test_two_imports_of_one_case_with_other_overrides_never_share_a_row(accelbench, tmp_path):
    """Imports store no workload: their rows grouped on the case columns alone, so a report of the two imports
    above averaged 1,024- and 8,192-token figures into one row (±110 % on the real LoRA log), and compare
    paired them naming nothing. The --set overrides are now their settings: a row each, a column, a named pair."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(lora_log())
    case = ("--case-name", "llama_7b_lora:torch:H100:1:8")
    assert run(accelbench, db, log, "short", *case).returncode == 0
    assert run(accelbench, db, log, "long", *case, "--set", "model.seq_len=8192").returncode == 0
    assert stored(db, "long")["metrics"]["overrides"] == {"model.seq_len": 8192}
    shown = accelbench("show", "long", "--db", str(db)).stdout  # the command says what the import assumed
    assert f"command: accelbench import {log} --format mllog --case-name llama_7b_lora:torch:H100:1:8 " in shown
    assert "--set model.seq_len=8192" in shown
    report = accelbench("report", "short", "long", "--db", str(db), "--format", "summary-csv").stdout
    rows = list(csv.DictReader(io.StringIO(report)))
    assert sorted(float(r["tokens_per_s_total"]) for r in rows) == pytest.approx([768 / 61 * 1024, 768 / 61 * 8192])
    terminal = accelbench("report", "short", "long", "--db", str(db), env={"COLUMNS": "250"}).stdout
    header = next(line for line in terminal.splitlines() if "case" in line and "rounds" in line)
    assert "model.seq_len" in header and "8,192" in terminal
    compare = accelbench("compare", "short", "long", "--db", str(db), "--format", "markdown").stdout
    (row,) = [line for line in compare.splitlines() if line.startswith("| llama_7b_lora")]
    assert "[differs: model.seq_len default/8192]" in row and "+700%" in row


# ---------------------------------------------------------------- MLPerf's headline in every view

def test_time_to_train_and_eval_accuracy_show_in_show_report_and_csv(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(lora_log())
    assert run(accelbench, db, log, "head", "--nnodes", "1", "--nprocs-per-node", "8").returncode == 0
    ttt = stored(db, "head")["metrics"]["time_to_train_s"]
    assert ttt == 1 + 140 + 30 + 31 + 3 * 8 - 1
    shown = accelbench("show", "head", "--db", str(db)).stdout
    assert f"time to train: {ttt:,.1f} s ({ttt / 60:,.1f} min) — log: run_stop - run_start, MLPerf's score " \
           "(run_stop status success: the run reached its quality target)" in shown
    assert "eval accuracy (last): 0.93 — log: the last eval_accuracy at 2,304" in shown
    assert "samples/s as logged: " in shown and "run status, as logged: success" in shown
    report = accelbench("report", "head", "--db", str(db)).stdout  # 160 columns: the headers wrap
    assert "time" in report and f"{ttt:,.1f}" in report and "0.93" in report  # columns of their own
    assert "samples/s" in report and "12.59" in report  # LoRA's log gives no tokens/s: its samples/s is shown
    markdown = accelbench("report", "head", "--db", str(db), "--format", "markdown").stdout
    header = next(line for line in markdown.splitlines() if line.startswith("| case | config |"))
    assert header.endswith("| step time | time to train | eval accuracy (last) |")
    assert f"| {ttt:,.1f} s ({ttt / 60:,.1f} min) | 0.93 |" in markdown
    (raw,) = csv.DictReader(io.StringIO(accelbench("report", "head", "--db", str(db), "--format", "csv").stdout))
    assert float(raw["time_to_train_s"]) == ttt and float(raw["eval_accuracy"]) == pytest.approx(0.93)
    (summary,) = csv.DictReader(io.StringIO(accelbench("report", "head", "--db", str(db), "--format",
                                                       "summary-csv").stdout))
    assert float(summary["time_to_train_s"]) == ttt and float(summary["eval_accuracy"]) == pytest.approx(0.93)


def test_epoch_counted_blocks_are_epochs_of_train_samples_unless_an_evaluation_says_otherwise(accelbench, tmp_path):
    """ResNet's structure: train_samples (one epoch) before the run, blocks of epoch_count epochs, evaluations at
    epoch numbers. The same blocks with evaluations far past the blocks' epochs count no epochs: refused."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"

    def resnet(eval_at) -> str:
        text = mllog("submission_benchmark", 0, "resnet") + mllog("global_batch_size", 0, 3264)
        text += mllog("train_samples", 0, 1281167)
        text += mllog("run_start", 1, event_type="INTERVAL_START")
        for k, seconds in enumerate((300.0, 250.0, 251.0)):
            start = 1 + 310.0 * k
            text += mllog("block_start", start, event_type="INTERVAL_START", first_epoch_num=1 + 4 * k, epoch_count=4)
            text += mllog("block_stop", start + seconds, event_type="INTERVAL_END", first_epoch_num=1 + 4 * k)
            text += mllog("eval_accuracy", start + seconds + 5, 0.70 + 0.02 * k, epoch_num=eval_at(k))
        return text + mllog("run_stop", 940, status="success")

    log.write_text(resnet(lambda k: 4 * (k + 1)))
    done = run(accelbench, db, log, "resnet", "--nnodes", "1", "--nprocs-per-node", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "resnet")
    assert row["samples_per_s"] == pytest.approx(8 * 1281167 / 501.0, rel=1e-12)
    assert "epoch_count (epochs), epochs of train_samples 1,281,167 samples" in row["metrics"]["sources"]["samples_per_s"]
    assert not any("whole steps" in w for w in row["warnings"]), row["warnings"]

    log.write_text(resnet(lambda k: 1281167 * 4 * (k + 1)))
    done = run(accelbench, db, log, "not-epochs", "--nnodes", "1", "--nprocs-per-node", "8")
    assert done.returncode == 1, done.stdout + done.stderr
    row = stored(db, "not-epochs")
    assert row["samples_per_s"] is None and "the blocks count something other than epochs" in row["reason"]


def test_compare_shows_time_to_train_and_eval_accuracy_beside_the_throughput(accelbench, tmp_path):
    """MLPerf's score was in show, report and CSV but in no compare (issue 30, "MLPerf's headline")."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(nemo_gpt3())
    assert run(accelbench, db, log, "a").returncode == 0 and run(accelbench, db, log, "b").returncode == 0
    ttt = stored(db, "a")["metrics"]["time_to_train_s"]
    shown = f"{ttt:,.1f} s ({ttt / 60:,.1f} min)"
    terminal = accelbench("compare", "a", "b", "--db", str(db)).stdout
    line = next(row for row in terminal.splitlines() if "time to train" in row)
    assert line.count(shown) == 2 and "+0.0%" in line
    assert "eval accuracy (last)" in terminal and terminal.count("2.72") == 2  # the last of 2.75 - 0.01 k
    markdown = accelbench("compare", "a", "b", "--db", str(db), "--format", "markdown").stdout
    assert "| time to train A | time to train B | B vs A | eval accuracy (last) A |" in markdown
    out = tmp_path / "compare.html"
    assert accelbench("compare", "a", "b", "--db", str(db), "--html", str(out)).returncode == 0
    assert "<td>time to train</td>" in out.read_text() and out.read_text().count(shown) == 2


def test_compare_of_runs_without_an_mlperf_score_has_no_such_rows(accelbench, tmp_path):
    from .test_results import document, fill

    db = tmp_path / "r.db"
    fill(db, [document("x", "gpt3_tiny", "torch", 0.5), document("y", "gpt3_tiny", "torch", 0.6)])
    terminal = accelbench("compare", "x", "y", "--db", str(db)).stdout
    assert "tok/s/dev" in terminal and "time to train" not in terminal and "eval accuracy" not in terminal


def test_a_stated_target_accuracy_is_shown_beside_the_last_evaluation(accelbench, tmp_path):
    """None of the published files states its target; a log that does (``target_accuracy``) has it shown."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(mllog("target_accuracy", 0, 0.925) + lora_log())
    assert run(accelbench, db, log, "t", "--nnodes", "1", "--nprocs-per-node", "8").returncode == 0
    metrics = stored(db, "t")["metrics"]
    assert metrics["eval_target"] == 0.925 and metrics["eval_accuracy"] == pytest.approx(0.93)
    shown = accelbench("show", "t", "--db", str(db)).stdout
    assert "eval target, as logged: 0.925 — log: target_accuracy" in shown
    assert "eval accuracy (last): 0.93 — " in shown and "run status, as logged: success" in shown

"""``accelbench import`` of each tool's log as the tool writes it, every stored figure checked.

Each test writes a log in its tool's own format (MLPerf's ``:::MLLOG`` events, Megatron-LM's
``training_log`` lines, torchtitan's metric line, PaddleNLP's Trainer interval line), imports it through
the real command into a real store, and compares every figure column the store derived with the value
worked out here from the lines written. FLOPs per token are worked out from the case's model numbers
(6 x matmul weights + 12 x layers x heads x head width x sequence), the peaks from vendors/nvidia.
"""
from __future__ import annotations

import json

import pytest

from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.schema import METRIC_COLUMNS

GIB, MIB = 2**30, 2**20
A100_FP16, H100_FP16, H100_BF16 = 312.0, 989.5, 989.5  # vendors/nvidia/vendor.yaml dense peaks


def gpt3_flops_per_token(layers: int, d: int, vocab: int = 50304, seq: int = 2048) -> int:
    """GPT-3 (gelu MLP 4d, full attention): 6 x (12 d^2 per layer + LM head) + 12 L d T."""
    return 6 * (layers * 12 * d * d + d * vocab) + 12 * layers * d * seq


LLAMA31_8B = 6 * (32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 4096 * 128256) + 12 * 32 * 4096 * 8192


def stored(db, run_id: str) -> dict:
    with ResultStore(db) as store:
        (row,) = store.attempts({"run_id": run_id})
    return row


def assert_figures(row: dict, expected: dict) -> None:
    """Every figure column of the row equals ``expected``; a column it does not name must be empty."""
    unknown = set(expected) - {c for c, _, _ in METRIC_COLUMNS}
    assert not unknown, unknown
    for column, _, _ in METRIC_COLUMNS:
        if expected.get(column) is None:
            assert row[column] is None, f"{column} = {row[column]!r}, expected none"
        else:
            assert row[column] == pytest.approx(expected[column], rel=1e-12), column


def imported(accelbench, db, log, fmt: str, case_name: str, run_id: str, *extra: str):
    return accelbench("import", str(log), "--format", fmt, "--case-name", case_name, "--run-id", run_id,
                      "--db", str(db), *extra)


# ---------------------------------------------------------------- MLPerf


T0 = 1_763_600_000_000  # ms


def mllog(key: str, at_s: float, value=None, event_type: str = "POINT_IN_TIME", **metadata) -> str:
    event = {"namespace": "", "time_ms": T0 + int(at_s * 1000), "event_type": event_type, "key": key,
             "value": value, "metadata": {"file": "train.py", "lineno": 1, **metadata}}
    return f":::MLLOG {json.dumps(event)}\n"


def mlperf_log(status: str) -> str:
    """An MLPerf result whose blocks count samples_count (Llama 2 70B LoRA's structure): init, then three train
    blocks each followed by an evaluation. (GPT-3's blocks count tokens in first_epoch_num: not this.)"""
    text = mllog("init_start", 0, event_type="INTERVAL_START") + mllog("submission_benchmark", 0, "llama2_70b_lora")
    text += mllog("submission_platform", 0, "8xA100") + mllog("global_batch_size", 0, 1536)
    text += mllog("init_stop", 5, event_type="INTERVAL_END") + mllog("run_start", 5, event_type="INTERVAL_START")
    blocks = ((10, 510, 0, 3072, 0.51), (520, 950, 3072, 6144, 0.66), (960, 1390, 6144, 9216, 0.72))
    for start, stop, first, last, accuracy in blocks:
        text += mllog("block_start", start, event_type="INTERVAL_START", samples_count=first)
        text += mllog("block_stop", stop, event_type="INTERVAL_END", samples_count=last)
        text += mllog("eval_accuracy", stop + 2, accuracy, samples_count=last)
    return text + mllog("run_stop", 1400, event_type="INTERVAL_END", status=status)


def test_a_standard_mlperf_log_is_stored_ok_with_time_to_train_block_throughput_and_accuracy(accelbench, tmp_path):
    db, log = tmp_path / "results.db", tmp_path / "result_0.txt"
    log.write_text("some launcher output\n" + mlperf_log("success"))
    done = imported(accelbench, db, log, "mllog", "gpt3_13B:torch:A100:1:8", "mlperf-ok")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "mlperf-ok")
    assert row["status"] == "ok" and row["source"] == "import:mllog/1" and row["precision"] == "fp16"
    samples_per_s = (6144 - 3072 + 9216 - 6144) / ((950 - 520) + (1390 - 960))  # block 1 is warm-up
    tokens = samples_per_s * 2048  # the case's sequence: the log states none
    tflops = gpt3_flops_per_token(40, 5120) * tokens / 8 / 1e12
    assert_figures(row, {"tokens_per_s_total": tokens, "tokens_per_s_per_device": tokens / 8,
                         "samples_per_s": samples_per_s, "tflops_per_device": tflops, "mfu": tflops / A100_FP16,
                         "samples_per_step": 1536, "memory_total_bytes": 80 * GIB})
    metrics = row["metrics"]
    assert metrics["time_to_train_s"] == 1400 - 5 == row["wall_time_s"]
    assert metrics["eval_accuracy"] == 0.72 and metrics["flops_per_token"] == gpt3_flops_per_token(40, 5120)
    assert row["environment"]["submission_platform"] == "8xA100"
    assert row["environment"]["submission_benchmark"] == "llama2_70b_lora"

    log.write_text(mlperf_log("aborted"))  # figures kept, the attempt failed, the command too
    done = imported(accelbench, db, log, "mllog", "gpt3_13B:torch:A100:1:8", "mlperf-aborted")
    assert done.returncode == 1 and "run_stop status 'aborted'" in done.stdout
    row = stored(db, "mlperf-aborted")
    assert row["status"] == "failed" and row["samples_per_s"] == pytest.approx(samples_per_s, rel=1e-12)


def test_an_mlperf_log_of_no_benchmark_counting_epoch_count_has_no_throughput_and_says_why(accelbench, tmp_path):
    """What epoch_count and train_samples count is the benchmark's (epochs, tokens, steps: the table,
    mlperf_benchmarks.yaml); a log that names no benchmark gets what its events state unambiguously (time to
    train, the score) and no throughput, the reason stored. (This test read epoch_count x train_samples as
    samples before issue 40: a guess that is 2.16e15 tokens/s on GPT-3's keys.)"""
    db, log = tmp_path / "results.db", tmp_path / "result_1.txt"
    text = mllog("train_samples", 0, 4096) + mllog("max_sequence_length", 0, 2048)
    text += mllog("run_start", 1, event_type="INTERVAL_START")
    for first, count, start, stop in ((1, 1, 2, 700), (2, 2, 705, 1905), (4, 2, 1910, 3060)):
        text += mllog("block_start", start, event_type="INTERVAL_START", first_epoch_num=first, epoch_count=count)
        text += mllog("block_stop", stop, event_type="INTERVAL_END", first_epoch_num=first)
    log.write_text(text + mllog("eval_accuracy", 3062, 0.759) + mllog("run_stop", 3065, status="success"))
    done = imported(accelbench, db, log, "mllog/1", "gpt3_13B:torch:A100:1:8", "mlperf-epochs", "--skip-intervals", "0")
    assert done.returncode == 1, done.stdout + done.stderr
    row = stored(db, "mlperf-epochs")
    assert row["status"] == "failed" and row["samples_per_s"] is None and row["tokens_per_s_total"] is None
    assert "not in accelbench's MLPerf table" in row["reason"] and "no samples_count" in row["reason"]
    assert row["metrics"]["time_to_train_s"] == 3064 and row["metrics"]["eval_accuracy"] == 0.759


# ---------------------------------------------------------------- Megatron-LM


def megatron_line(stamp: str, iteration: int, ms: float, tflops: float, loss: float) -> str:
    return (f" [2024-05-01 12:{stamp}] iteration {iteration:8d}/{1000:8d} | consumed samples: {iteration * 512:12d} "
            f"| elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
            f"learning rate: {1.5e-4:.6E} | global batch size: {512:5d} | lm loss: {loss:.6E} | loss scale: 1.0 | "
            f"grad norm: 0.912 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def test_megatron_iteration_and_memory_lines(accelbench, tmp_path):
    db, log = tmp_path / "results.db", tmp_path / "megatron.log"
    log.write_text(
        "using world size: 8, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 1\n"
        + megatron_line("03:20", 10, 20000.0, 280.0, 3.0)  # warm-up interval
        + "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.5 | max allocated: 2345.6 | "
          "reserved: 3000.0 | max reserved: 3100.0\n"
        + "[Rank 1] (after 10 iterations) memory (MB) | allocated: 1200.0 | max allocated: 2400.0 | "
          "reserved: 2900.0 | max reserved: 3050.0\n"
        + megatron_line("05:40", 20, 14000.0, 400.0, 2.5)
        + megatron_line("08:05", 30, 14500.0, 386.2, 2.25)
        + "[after training is done] datetime: 2024-05-01 12:08:06\n")
    done = imported(accelbench, db, log, "megatron", "gpt3_6.7B:torch:H100:1:8", "megatron-1")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "megatron-1")
    assert row["status"] == "ok" and row["source"] == "import:megatron/1"
    samples_per_s = (512 * 10 + 512 * 10) / (14.0 * 10 + 14.5 * 10)
    tokens = samples_per_s * 2048
    tflops = gpt3_flops_per_token(32, 4096) * tokens / 8 / 1e12
    assert_figures(row, {"tokens_per_s_total": tokens, "tokens_per_s_per_device": tokens / 8,
                         "samples_per_s": samples_per_s, "tflops_per_device": tflops, "mfu": tflops / H100_FP16,
                         "peak_memory_bytes": 2400.0 * MIB, "peak_memory_reserved_bytes": 3100.0 * MIB,
                         "memory_total_bytes": 80 * GIB, "step_time_median_s": (14.0 + 14.5) / 2,
                         "loss_last": 2.25, "samples_per_step": 512})
    metrics = row["metrics"]
    # Megatron's own TFLOP/s over the two intervals: their FLOPs over their time, not the mean of the two lines
    assert metrics["tflops_per_device_logged"] == pytest.approx((400.0 * 14.0 + 386.2 * 14.5) / (14.0 + 14.5), rel=1e-12)
    assert metrics["loss_first"] == 3.0 and metrics["memory_kind"] == "allocated"
    assert metrics["step_time_s"]["n"] == 2 and row["wall_time_s"] == 8 * 60 + 5 - (3 * 60 + 20)


# ---------------------------------------------------------------- torchtitan

RED, GREEN, YELLOW, BLUE, CYAN, MAGENTA, RESET = (f"\x1b[{n}m" for n in (31, 32, 33, 34, 36, 35, 39))


def titan_line(second: int, step: int, loss: float, gib: float, tps: int, tflops: float, mfu: float) -> str:
    return (f"[rank0]:[titan] 2025-01-10 12:00:{second:02d},000 - root - INFO - {RED}step: {step:2}  "
            f"{GREEN}loss: {loss:7.4f}  {YELLOW}memory: {gib:5.2f}GiB({gib / 80 * 100:.2f}%)  "
            f"{BLUE}tps: {tps:,}  {CYAN}tflops: {tflops:,.2f}  {MAGENTA}mfu: {mfu:.2f}%{RESET}\n")


def test_torchtitan_metric_lines_with_colour_codes(accelbench, tmp_path):
    db, log = tmp_path / "results.db", tmp_path / "titan.log"
    log.write_text("[rank0]:[titan] 2025-01-10 12:00:00,000 - root - INFO - Training starts at step 1.\n"
                   + titan_line(5, 1, 12.25, 50.5, 3000, 173.74, 17.56)  # step 1 alone: warm-up
                   + titan_line(17, 10, 9.5, 52.31, 6000, 347.48, 35.12)  # steps 2..10
                   + titan_line(31, 20, 7.8125, 52.0, 6200, 359.06, 36.29))  # steps 11..20
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:8", "titan-1")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "titan-1")
    per_device = (9 + 10) / (9 / 6000 + 10 / 6200)  # tokens over time, not the mean of the lines
    tflops = LLAMA31_8B * per_device / 1e12
    assert_figures(row, {"tokens_per_s_total": per_device * 8, "tokens_per_s_per_device": per_device,
                         "tflops_per_device": tflops, "mfu": tflops / H100_BF16,
                         "peak_memory_reserved_bytes": 52.31 * GIB, "memory_total_bytes": 80 * GIB,
                         "loss_last": 7.8125})
    metrics = row["metrics"]
    assert metrics["tflops_per_device_logged"] == pytest.approx(19 / (9 / 347.48 + 10 / 359.06), rel=1e-12)
    assert metrics["mfu_logged"] == pytest.approx(19 / (9 / 35.12 + 10 / 36.29) / 100, rel=1e-12)
    assert metrics["loss_first"] == 12.25 and row["precision"] == "bf16" and row["wall_time_s"] == 31 - 5


# ---------------------------------------------------------------- PaddleNLP


def paddle_line(minute: int, step: int, loss: float, allocated: float, reserved: float, sps: float,
                tps: float) -> str:
    return (f"[2026-11-20 10:{minute:02d}:00,000] [    INFO] - loss: {loss}, learning_rate: 3e-05, "
            f"global_step: {step}, current_memory_allocated: 20.5, current_memory_reserved: 30.1, "
            f"max_memory_allocated: {allocated}, "
            f"max_memory_reserved: {reserved}, interval_runtime: 100.0, interval_samples_per_second: {sps}, "
            f"interval_tokens_per_second_per_device: {tps}, interval_steps_per_second: 0.01, "
            "progress_or_epoch: 0.01\n")


def test_an_a100_paddlenlp_import_gets_tflops_mfu_and_both_memory_peaks(accelbench, tmp_path):
    db, log = tmp_path / "results.db", tmp_path / "workerlog.0"
    log.write_text("[2026-11-20 10:00:00,000] [    INFO] - ***** Running training *****\n"
                   + paddle_line(1, 1, 7.0, 40.1, 60.0, 1.5625, 400.0)  # warm-up
                   + paddle_line(2, 2, 6.5, 41.6, 66.3, 10.15625, 2600.0)
                   + paddle_line(3, 3, 6.25, 41.5, 66.0, 10.546875, 2700.0))
    done = imported(accelbench, db, log, "paddlenlp", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "paddle-1",
                    "--extern-config", "config_TP1PP1SH2SP8A10080Gx1x8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "paddle-1")
    per_device = (2600.0 + 2700.0) / 2
    tflops = gpt3_flops_per_token(32, 4096) * per_device / 1e12
    assert_figures(row, {"tokens_per_s_total": per_device * 8, "tokens_per_s_per_device": per_device,
                         "samples_per_s": (10.15625 + 10.546875) / 2, "tflops_per_device": tflops,
                         "mfu": tflops / A100_FP16,
                         "peak_memory_bytes": 41.6 * GIB, "peak_memory_reserved_bytes": 66.3 * GIB,
                         "memory_total_bytes": 80 * GIB, "step_time_median_s": 1 / 0.01, "loss_last": 6.25})
    assert row["metrics"]["memory_kind"] == "allocated" and row["precision"] == "fp16"
    assert row["extern_config"] == "config_TP1PP1SH2SP8A10080Gx1x8" and row["wall_time_s"] == 180
    shown = accelbench("show", "last", "--db", str(db))  # the newest run, as `accelbench runs` lists it first
    assert shown.returncode == 0 and "run paddle-1 (import:paddlenlp/1)" in shown.stdout, shown.stdout
    # both peaks, each named; first the one the report's table shows for the row
    assert "memory/device: 66.3 GiB / 80.0 GiB (reserved, from the framework's allocator)" in shown.stdout
    assert "also allocated: 41.6 GiB (allocated, from the framework's allocator)" in shown.stdout


# ---------------------------------------------------------------- nothing to store


@pytest.mark.parametrize("fmt", ["mllog", "megatron", "torchtitan", "paddlenlp"])
def test_a_log_with_no_figure_fails_the_import(accelbench, tmp_path, fmt):
    db, log = tmp_path / "results.db", tmp_path / "empty.log"
    log.write_text("[2024-05-01 12:00:00] starting\nbuilding the model ...\nsaving checkpoint done\n")
    done = imported(accelbench, db, log, fmt, "gpt3_6.7B:torch:H100:1:8", f"empty-{fmt}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "empty.log: failed" in done.stdout and "Traceback" not in done.stderr
    row = stored(db, f"empty-{fmt}")
    assert row["status"] == "failed" and row["reason"]
    assert_figures(row, {})

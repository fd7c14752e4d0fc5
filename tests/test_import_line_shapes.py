"""``accelbench import`` of line logs as real runs write them (issue 30): torchtitan with several ranks logging,
validation lines and no memory reading; PaddleNLP's end-of-run summary and the older scripts' line; a
tool's TFLOP/s beside accelbench's; and what an import that names no case, or the wrong framework, gets.

Each log is built here with the structure the tool writes (torchtitan's MetricsProcessor line with
torchrun's ``[rankN]:`` prefix, PaddleNLP's Trainer callbacks and ``speed_metrics`` summary, Megatron-LM's
``training_log``), and every figure is asserted against the arithmetic done on the numbers written.
"""
from __future__ import annotations

import pytest


from .test_importers import imported, megatron_line, paddle_line, stored

GIB = 2**30


def titan(step: int, tps: int, rank: int | None = 0, memory: float = 52.0, validate: bool = False) -> str:
    prefix = "" if rank is None else f"[rank{rank}]:"
    what = "validate step" if validate else "step"
    return (f"{prefix}[titan] 2025-01-10 12:00:{step % 60:02d},000 - root - INFO - {what}: {step:2}  loss:  7.5000  "
            f"memory: {memory:5.2f}GiB({memory / 80 * 100:.2f}%)  tps: {tps:,}  tflops: 300.00  mfu: 30.00%\n")


def test_torchtitan_with_four_ranks_interleaved_keeps_rank_0_and_skips_warm_up_by_step(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    text = ""
    for step, tps in ((1, 500), (10, 6000), (20, 6200)):
        for rank in (2, 0, 3, 1):  # the ranks' lines interleave; others' step 1 came first in the old reading
            text += titan(step, tps if rank == 0 else 100 * (rank + 1), rank)
    text += titan(20, 99_999, 0, validate=True)  # the validator's tps: not training throughput
    log.write_text(text)
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:4", "ranks")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "ranks")
    per_device = (9 + 10) / (9 / 6000 + 10 / 6200)
    assert row["tokens_per_s_per_device"] == pytest.approx(per_device, rel=1e-12)
    assert row["tokens_per_s_total"] == pytest.approx(per_device * 4, rel=1e-12)
    assert row["environment"]["rank"] == 0 and row["environment"]["validation_lines"] == 1
    warnings = "\n".join(row["warnings"])
    assert "4 ranks log metric lines (ranks 0-3): rank 0's kept, the others' left out" in warnings
    assert "1 validation line(s) (validate step) left out: not training throughput" in warnings
    assert row["metrics"]["sources"]["tokens_per_s_per_device"] == (
        "log: tps (tokens/s per device), time-weighted over 2 line(s) after the first 1 (warm-up), each covering one "
        "log interval of 10 step(s) (the smallest gap between consecutive lines)")


def test_torchtitan_unprefixed_lines_repeating_each_step_keep_one_line_per_step(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    text = "".join(titan(step, tps + 7 * r, None) for step, tps in ((1, 500), (10, 6000), (20, 6200)) for r in range(4))
    log.write_text(text)
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:4", "repeats")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "repeats")
    assert row["tokens_per_s_per_device"] == pytest.approx(19 / (9 / 6000 + 10 / 6200), rel=1e-12)
    assert any(w.startswith("9 metric line(s) repeat a step already logged") for w in row["warnings"])


def test_a_torchtitan_memory_of_0_gib_is_no_reading(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    log.write_text(titan(1, 500, memory=0) + titan(10, 6000, memory=0))
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:8", "no-memory")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "no-memory")
    assert row["peak_memory_reserved_bytes"] is None and row["tokens_per_s_per_device"] == 6000
    assert any(w.startswith("memory: 0.00GiB on 2 line(s): no reading") for w in row["warnings"])


SUMMARY = ("[2026-11-20 10:04:00,000] [    INFO] - train_runtime: 240.5, train_samples_per_second: 8.5, "
           "train_steps_per_second: 0.0125, train_loss: 6.9012, progress_or_epoch: 0.01\n"
           "[2026-11-20 10:04:00,000] [    INFO] - ***** train metrics *****\n"
           "[2026-11-20 10:04:00,000] [    INFO] -   progress_or_epoch        =       0.01\n"
           "[2026-11-20 10:04:00,000] [    INFO] -   train_loss               =     6.9012\n"
           "[2026-11-20 10:04:00,000] [    INFO] -   train_runtime            = 0:04:00.50\n"
           "[2026-11-20 10:04:00,000] [    INFO] -   train_samples_per_second =        8.5\n"
           "[2026-11-20 10:04:00,000] [    INFO] -   train_steps_per_second   =     0.0125\n"
           "[2026-11-20 10:04:01,000] [    INFO] - [timelog] Effective tokens per second: 3456.78 token/s "
           "(2026-11-20 10:04:01)\n")


def test_paddlenlp_summary_figures_beside_the_interval_means_and_train_loss_as_the_final_loss(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "workerlog.0"
    log.write_text(paddle_line(1, 1, 7.0, 40.1, 60.0, 1.5625, 400.0) + paddle_line(2, 2, 6.5, 41.6, 66.3, 10.0, 2600.0)
                   + paddle_line(3, 3, 6.25, 41.5, 66.0, 10.5, 2700.0) + SUMMARY)
    done = imported(accelbench, db, log, "paddlenlp", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "summary")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "summary")
    metrics = row["metrics"]
    assert row["samples_per_s"] == pytest.approx(10.25) and row["tokens_per_s_per_device"] == pytest.approx(2650)
    assert metrics["samples_per_s_run"] == 8.5 and metrics["effective_tokens_per_s_logged"] == 3456.78
    assert row["loss_last"] == 6.9012 and metrics["loss_last_interval"] == 6.25
    assert metrics["sources"]["loss_last"].startswith("log: train_loss of the end-of-run summary")
    assert metrics["sources"]["samples_per_s"].startswith(
        "log: interval_samples_per_second (samples/s), time-weighted over 2 line(s) after the first 1 (warm-up)")
    assert any("train_samples_per_second 8.5 (warm-up included) and the interval mean 10.25 differ by -17.1%" in w
               for w in row["warnings"])
    shown = accelbench("show", "summary", "--db", str(db)).stdout
    assert "samples/s over the whole run, as logged: 8.5 — log: train_samples_per_second" in shown
    assert "effective tokens/s as logged: 3,457" in shown and "loss of the last interval: 6.2500" in shown


def old_line(step: int, speed: float, ips: str) -> str:
    return (f"[2021-06-01 10:00:{step:02d},000] [    INFO] - global step {step}, epoch: 0, batch: {step - 1}, "
            f"loss: {9.0 - step / 10:.6f}, avg_reader_cost: 0.00012 sec, avg_batch_cost: {1 / speed:.5f} sec, "
            f"speed: {speed} step/s, {ips}, learning rate: 9.9e-05\n")


def test_paddlenlp_older_global_step_lines_are_read(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "workerlog.0"
    log.write_text(old_line(1, 0.5, "ips_total: 8192 tokens/s, ips: 1024 tokens/s")
                   + old_line(2, 1.9, "ips_total: 31130 tokens/s, ips: 3891 tokens/s")
                   + old_line(3, 2.1, "ips_total: 34406 tokens/s, ips: 4301 tokens/s"))
    done = imported(accelbench, db, log, "paddlenlp", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "old-tokens")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "old-tokens")
    # each line's rate over the time its step took (avg_batch_cost, as printed): tokens over time, not the mean
    # of the two lines' rates
    t2, t3 = round(1 / 1.9, 5), round(1 / 2.1, 5)
    assert row["tokens_per_s_per_device"] == pytest.approx((3891 * t2 + 4301 * t3) / (t2 + t3))
    assert row["tokens_per_s_total"] == pytest.approx((31130 * t2 + 34406 * t3) / (t2 + t3))  # the log's own, not x 8
    assert row["step_time_median_s"] == pytest.approx((t2 + t3) / 2) and row["loss_last"] == pytest.approx(8.7)

    log.write_text(old_line(1, 0.5, "ips: 0.1 seqs/s") + old_line(2, 2.0, "ips: 0.25 seqs/s")
                   + old_line(3, 2.0, "ips: 0.27 seqs/s"))
    done = imported(accelbench, db, log, "paddlenlp", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "old-seqs")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "old-seqs")
    assert row["samples_per_s"] == pytest.approx(0.26 * 8) and row["tokens_per_s_per_device"] == pytest.approx(0.26 * 2048)
    assert row["metrics"]["sources"]["samples_per_s"] == "derived: samples/s per device x 8 devices"


def test_megatrons_own_tflops_is_shown_beside_accelbenchs_and_a_gap_past_the_tolerance_warned(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "megatron.log"
    log.write_text(megatron_line("03:20", 10, 20000.0, 280.0, 3.0) + megatron_line("05:40", 20, 14000.0, 150.0, 2.5))
    done = imported(accelbench, db, log, "megatron", "gpt3_6.7B:torch:H100:1:8", "gap")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "gap")
    ours = row["tflops_per_device"]
    assert row["metrics"]["tflops_per_device_logged"] == 150.0
    said = f"TFLOP/s/device: the log's 150 and accelbench's {ours:,.4g} (case gpt3_6.7B) differ by {150 / ours - 1:+.1%}"
    assert any(w.startswith(said) and "past the 10% tolerance" in w for w in row["warnings"]) and said in done.stderr
    shown = accelbench("show", "gap", "--db", str(db)).stdout
    assert f"TFLOP/s/device (model): {ours:.3g} — case gpt3_6.7B: " in shown
    assert ("TFLOP/s/device as logged: 150 — log: throughput per GPU (TFLOP/s/GPU) (TFLOP/s per device; Megatron's "
            "own FLOP count") in shown


# ---------------------------------------------------------------- what an import names

def test_an_import_of_no_case_stores_the_logs_own_figures_under_the_layout_given(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    log.write_text(titan(1, 500) + titan(10, 6000))
    # issue 40: no layout is demanded where no stored figure needs one; the log's own per-device figure stands,
    # nothing is derived from a device count (a 1 x 1 placeholder, said so); half a layout is refused
    bare = accelbench("import", str(log), "--format", "torchtitan", "--run-id", "bare", "--db", str(db))
    assert bare.returncode == 0 and "the log states no layout and none was given" in bare.stderr
    row = stored(db, "bare")
    assert row["tokens_per_s_per_device"] == 6000 and row["tokens_per_s_total"] is None
    assert row["metrics"]["layout"].startswith("not stated")
    half = accelbench("import", str(log), "--format", "torchtitan", "--nnodes", "2", "--db", str(db))
    assert half.returncode == 2 and "only --nnodes gives a layout" in half.stderr
    done = accelbench("import", str(log), "--format", "torchtitan", "--model", "moe 16x1B", "--hardware", "H100",
                      "--nnodes", "2", "--nprocs-per-node", "8", "--run-id", "nocase", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "nocase")
    assert (row["case"], row["framework"], row["hardware"], row["world_size"]) == ("moe_16x1B", "torchtitan", "H100", 16)
    assert row["tokens_per_s_per_device"] == 6000 and row["memory_total_bytes"] == 80 * GIB
    assert row["tflops_per_device"] == 300.0 and row["mfu"] is None  # the tool's own, named; no peak without a case
    assert row["metrics"]["sources"]["tflops_per_device"] == "log: the tool's own TFLOP/s (no case FLOPs per token)"


@pytest.mark.parametrize("argv, says", [
    (("--case-name", "gpt3_13B:jax:A100:1:8"), "case 'gpt3_13B' declares the frameworks torch, paddle, not 'jax'"),
    (("--set", "model.seq_len=8192"), "--set and --extern-config change a case's workload"),
    (("--case-name", "gpt3_13B:torch:A100:1:8", "--nnodes", "2"), "--nnodes name what ran for an import of no case"),
])
def test_an_import_naming_what_cannot_be_is_refused(accelbench, tmp_path, argv, says):
    log = tmp_path / "titan.log"
    log.write_text(titan(1, 500) + titan(10, 6000))
    done = accelbench("import", str(log), "--format", "torchtitan", *argv, "--db", str(tmp_path / "r.db"))
    assert done.returncode == 2 and says in done.stderr, done.stderr

"""One test per defect issue 40 names in the line-log importers, each failing on the code before it: a line after
left-out lines weighed as the whole gap, only rank 0 read, the 2022 PaddleNLP Trainer's samples/s as the
headline, runs that trained nothing stored ok, memory lines without ``[Rank N]`` ignored, Megatron-Core's time
stamps with microseconds unread, and an import's MFU built in a second place. Every log is written here.
"""
from __future__ import annotations

import pytest

from run_benchmarks.results.figures import analyze, derive

from .test_analyze import rank_log
from .test_importers import imported, megatron_line, stored
from .test_import_line_shapes import titan

GIB, MIB = 2**30, 2**20
CPU = "gpt2_tiny:torch:cpu:1:1"


def test_a_line_after_left_out_lines_weighs_one_interval_not_the_gap(accelbench, tmp_path):
    """Iterations 30 and 40 were left out of the log (pasted in an issue): the line at 50 is still the mean of
    iterations 41-50, one interval, and weighs as much as the others; it was weighed as 30 iterations."""
    db, log = tmp_path / "r.db", tmp_path / "megatron.log"
    times = {10: 20000.0, 20: 14000.0, 50: 30000.0, 60: 14000.0}
    log.write_text("".join(megatron_line(f"{k:02d}:00", k, ms, 100.0, 2.0) for k, ms in times.items()))
    done = imported(accelbench, db, log, "megatron", "gpt3_6.7B:torch:H100:1:8", "gap")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "gap")
    assert row["samples_per_s"] == pytest.approx(512 * 30 / (14.0 * 10 + 30.0 * 10 + 14.0 * 10), rel=1e-12)
    assert row["environment"]["interval"] == 10 and row["environment"]["measured"] == 3


def test_several_ranks_the_figures_come_from_the_lowest_rank_with_lines_after_its_warm_up(accelbench, tmp_path):
    """Rank 0 printed only its warm-up step: its memory and loss were stored ok with no throughput."""
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    text = titan(1, 500, 0, memory=30.0)
    for step, tps in ((1, 400), (10, 6000), (20, 6200)):
        text += "".join(titan(step, tps + rank, rank) for rank in (2, 1, 3))
    log.write_text(text)
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:4", "ranks")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "ranks")
    assert row["environment"]["rank"] == 1
    assert row["tokens_per_s_per_device"] == pytest.approx(19 / (9 / 6001 + 10 / 6201), rel=1e-12)
    assert row["peak_memory_reserved_bytes"] == pytest.approx(52 * GIB)  # the largest of every rank's


def paddle_2022(step: int, runtime: float, steps: int, device_batch: int) -> str:
    """The 2022 Trainer's interval line (paddlenlp/trainer/trainer_base.py): one step's samples on one device over
    the interval's runtime."""
    return (f"[2022-08-31 16:{step // 60:02d}:{step % 60:02d},517] [    INFO] - loss: 1.2, learning_rate: 3e-05, "
            f"global_step: {step}, interval_runtime: {runtime}, interval_samples_per_second: "
            f"{round(device_batch / runtime, 4)}, interval_steps_per_second: {round(steps / runtime, 4)}, epoch: 0.1\n")


def test_the_2022_paddlenlp_samples_per_second_is_named_and_never_the_headline(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "workerlog.0"
    args = "".join(f"[2022-08-31 16:00:00,517] [    INFO] - {key:30}:{value}\n"
                   for key, value in (("per_device_train_batch_size", 8), ("gradient_accumulation_steps", 1),
                                      ("logging_steps", 10)))
    log.write_text(args + "".join(paddle_2022(step, 5.0, 10, 8) for step in (10, 20, 30)))
    done = imported(accelbench, db, log, "paddlenlp", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "p2022")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "p2022")
    assert row["samples_per_s"] is None and row["tokens_per_s_per_device"] is None  # 1.6 samples/s: 10x low
    assert row["step_time_median_s"] == pytest.approx(0.5)
    said = ("the log's interval_samples_per_second contradicts its other figures and is left out: "
            "interval_samples_per_second x the step time is 0.8 samples per step, not a whole multiple of one "
            "device's batch, 8")
    assert any(w.startswith(said) for w in row["warnings"]) and said in done.stderr
    assert "interval_samples_per_second" in row["metrics"]["contradictions"]


def megatron_untrained(iteration: int, skipped: int = 0, grad: str = "0.912", lr: float = 1.5e-4) -> str:
    return megatron_line("00:00", iteration, 1000.0, 100.0, 2.0).replace(
        "number of skipped iterations:   0", f"number of skipped iterations: {skipped:3d}").replace(
        "grad norm: 0.912", f"grad norm: {grad}").replace(f"learning rate: {1.5e-4:.6E}", f"learning rate: {lr:.6E}")


UNTRAINED = {
    "skipped": ("megatron", "".join(megatron_untrained(k, skipped=10) for k in (10, 20, 30)),
                "every iteration was skipped by the loss scaler (number of skipped iterations"),
    "nan-grad": ("megatron", "".join(megatron_untrained(k, grad="nan") for k in (10, 20, 30)),
                 "the gradient norm is nan on every line (grad norm, 3 line(s))"),
    "lr-zero": ("megatron", "".join(megatron_untrained(k, lr=0.0) for k in (10, 20, 30)),
                "the learning rate is 0 on every line (learning rate, 3 line(s))"),
    "not-run": ("paddleformers", "".join(
        f"[2025-05-01 10:00:{k:02d},000] [    INFO] - loss: 0.0, learning_rate: 3e-05, global_step: {k}, "
        f"interval_runtime: 10.0, interval_samples_per_second: 25.6, interval_steps_per_second: 1.0\n"
        for k in (10, 20, 30)) + "[2025-05-01 10:01:00,000] [    INFO] - All steps were skipped, the total loss is "
                                 "set to 0.\n", 'optimizer not run: the log says "All steps were skipped"'),
}


@pytest.mark.parametrize("name", list(UNTRAINED))
def test_a_run_that_trained_nothing_is_flagged_in_every_view_never_ok(accelbench, tmp_path, name):
    fmt, text, cause = UNTRAINED[name]
    db, log = tmp_path / "r.db", tmp_path / "train.log"
    log.write_text(text)
    done = imported(accelbench, db, log, fmt, CPU, name)
    assert done.returncode == 1, done.stdout + done.stderr
    row = stored(db, name)
    assert row["status"] == "failed" and row["reason"].startswith("trained nothing (flag trained_nothing): ")
    assert cause in row["reason"] and any(cause in c for c in row["metrics"]["trained_nothing"])
    assert "trained nothing" in done.stdout  # the import's own output
    shown = accelbench("show", name, "--db", str(db)).stdout
    assert ": failed — trained nothing (flag trained_nothing)" in shown
    report = accelbench("report", name, "--db", str(db)).stdout
    assert "1 failed" in report and "round 1 trained nothing (flag trained_nothing, status failed)" in report
    markdown = accelbench("report", name, "--db", str(db), "--format", "markdown").stdout
    assert "trained nothing (flag trained_nothing" in markdown
    csv = accelbench("report", name, "--db", str(db), "--format", "csv").stdout
    assert "failed" in csv and "trained nothing (flag trained_nothing)" in csv
    compared = accelbench("compare", name, name, "--db", str(db)).stdout
    assert "⚑ A " in compared and "trained nothing (flag trained_nothing" in compared


def test_memory_lines_with_and_without_a_rank_prefix_are_read(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "megatron.log"
    memory = "(after 10 iterations) memory (MB) | allocated: 1000.0 | max allocated: {} | reserved: 3000.0 | " \
             "max reserved: {}\n"
    log.write_text(megatron_line("00:10", 10, 2000.0, 100.0, 3.0) + memory.format(2345.5, 3100.0)
                   + "[Rank 1] " + memory.format(2000.0, 3300.0) + megatron_line("00:20", 20, 1000.0, 100.0, 2.0))
    done = imported(accelbench, db, log, "megatron", CPU, "memory")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "memory")
    assert row["peak_memory_bytes"] == pytest.approx(2345.5 * MIB)
    assert row["peak_memory_reserved_bytes"] == pytest.approx(3300.0 * MIB)


def test_megatron_core_time_stamps_with_microseconds_give_the_runs_span(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "megatron.log"
    log.write_text("".join(megatron_line(f"0{k}:00", k, 1000.0, 100.0, 2.0).replace(
        f"12:0{k}:00]", f"12:0{k}:00.250000]") for k in (1, 2, 4)))
    done = imported(accelbench, db, log, "megatron", CPU, "stamps")
    assert done.returncode == 0, done.stdout + done.stderr
    assert stored(db, "stamps")["wall_time_s"] == 180


def test_an_imports_tflops_and_mfu_come_from_the_function_a_runs_round_uses(accelbench, tmp_path, monkeypatch):
    """One function, not two copies: what it returns is what a run's round and an import both store."""
    monkeypatch.setattr(derive, "utilisation", lambda tflops, peak, precision, note="": derive.Utilisation(
        0.123, f"the one MFU of {tflops:.3g}"))
    round_ = analyze.round_metrics([rank_log(0, [1.0, 1.0, 1.0, 1.0], tokens=1000)], peak_tflops=100.0, peak_note="")
    assert (round_.mfu, round_.mfu_note) == (0.123, f"the one MFU of {round_.tflops_per_device:.3g}")
    db, log = tmp_path / "r.db", tmp_path / "megatron.log"
    log.write_text(megatron_line("00:10", 10, 20000.0, 300.0, 3.0) + megatron_line("00:20", 20, 14000.0, 400.0, 2.0))
    done = imported(accelbench, db, log, "megatron", "gpt3_6.7B:torch:H100:1:8", "one")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "one")
    assert row["mfu"] == 0.123 and row["metrics"]["mfu_note"] == f"the one MFU of {row['tflops_per_device']:.3g}"


def test_a_memory_share_gives_the_devices_size_and_is_checked_against_the_hardware(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "titan.log"
    log.write_text((titan(1, 500, memory=60.0) + titan(10, 6000, memory=60.0)).replace("(75.00%)", "(62.50%)"))
    done = accelbench("import", str(log), "--format", "torchtitan", "--model", "llama", "--nnodes", "1",
                      "--nprocs-per-node", "8", "--run-id", "share", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "share")  # 60 GiB is 62.5 % of 96 GiB; no hardware named: the log's size is the total
    assert row["memory_total_bytes"] == 96 * GIB and row["metrics"]["memory_total_source"] == "log"
    done = imported(accelbench, db, log, "torchtitan", "llama3.1_8b:torch:H100:1:8", "h100")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "h100")
    assert row["memory_total_bytes"] == 80 * GIB  # the declared H100 is kept, and the contradiction named
    assert any(w.startswith("the log's memory share contradicts the declared hardware: it implies a device of "
                            "96.0 GiB, the hardware named has 80.0 GiB") for w in row["warnings"])

"""``accelbench import`` of hostile and impossible logs, through the real command: never a traceback, memory
and time bounded whatever the log holds, and no figure that cannot be stored as ok (issue 27).

Each log is built here (never a real one copied): the structure of what the tools write, with one thing
made hostile. Every test checks the exit code, the message the user reads and that no traceback shows.
"""
from __future__ import annotations

import json

import pytest

from run_benchmarks.results.figures import analyze
from run_benchmarks.results.importers.parsers import PARSERS, register

from .test_analyze import rank_log
from .test_hostile_inputs import run_bounded
from .test_importers import (T0, megatron_line, mllog, mlperf_log, paddle_line, stored, titan_line)

CASE = "gpt2_tiny:torch:cpu:1:1"  # no declared peak: only the checks that need none apply
H100 = "gpt3_6.7B:torch:H100:1:8"  # a declared peak (989.5 TFLOP/s fp16/bf16)
CAP = "ACCELBENCH_MAX_LOG_LINE_BYTES"
FORMATS = ["mllog", "megatron", "torchtitan", "paddlenlp"]


def run_import(accelbench, db, log, fmt: str, run_id: str, case: str = CASE, extra_env: dict | None = None):
    """The command in this process (the ``accelbench`` fixture: an import reaches no launcher), its environment
    ``extra_env``; memory and time bounds are measured on a process of their own (``run_bounded``)."""
    done = accelbench("import", str(log), "--format", fmt, "--case-name", case, "--run-id", run_id, "--db", str(db),
                      env=extra_env)
    assert "Traceback" not in done.stdout and "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def mllog_at(key: str, time_ms, value=None, **metadata) -> str:
    """A :::MLLOG line with its time_ms as given (mllog() of test_importers takes seconds after T0)."""
    event = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
             "metadata": metadata}
    return f":::MLLOG {json.dumps(event)}\n"


# ---------------------------------------------------------------- MLLOG lines that are no events


@pytest.mark.parametrize("time_ms, said", [(-5000, "time_ms -5,000 is negative"),
                                           ("1e400", "time_ms inf is not finite")])
def test_an_mllog_time_that_is_no_time_fails_the_import(accelbench, tmp_path, time_ms, said):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    stop = mllog_at("run_stop", 0, status="success").replace('"time_ms": 0', f'"time_ms": {time_ms}')
    log.write_text(mlperf_log("success").rsplit(":::MLLOG", 1)[0] + stop)  # run_stop's time: no time
    done = run_import(accelbench, db, log, "mllog", "bad-time")
    assert done.returncode == 1, done.stdout + done.stderr
    line = log.read_text().count("\n")  # run_stop, the last line
    assert "result_0.txt: failed" in done.stdout and f"result_0.txt:{line}: run_stop {said}" in done.stdout
    assert "no run_stop event" in done.stdout
    row = stored(db, "bad-time")
    assert row["status"] == "failed" and said in row["reason"] and row["wall_time_s"] is None


def test_mllog_json_nested_100000_deep_is_left_out_with_a_warning(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(":::MLLOG " + "[" * 100_000 + "]" * 100_000 + "\n"
                   + ':::MLLOG {"key": "run_start", "time_ms": ' + "[" * 100_000 + "\n" + mlperf_log("success"))
    done = run_import(accelbench, db, log, "mllog", "deep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "result_0.txt: ok" in done.stdout
    assert "result_0.txt:1: JSON after :::MLLOG nested deeper than Python parses; left out" in done.stderr
    assert "result_0.txt:2: JSON after :::MLLOG nested deeper" in done.stderr
    row = stored(db, "deep")
    assert row["status"] == "ok" and row["samples_per_s"] and len(row["warnings"]) == 3
    assert row["warnings"][2].startswith("sequence length 128 from case gpt2_tiny: the log states none")


def test_mllog_values_of_the_wrong_type_are_left_out_with_a_warning(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(mllog_at(["run_start"], T0) + mllog_at("global_batch_size", T0, "lots")
                   + mllog_at("eval_accuracy", T0, {"a": [1]}) + mllog_at("submission_org", T0, [[["x"]]])
                   + ':::MLLOG {"key": "tracked_stats", "time_ms": ' + "9" * 5000 + "}\n"
                   + mllog_at("block_start", T0, samples_count="x") + mllog_at("block_stop", T0 + 5, samples_count=3)
                   + mlperf_log("success"))
    done = run_import(accelbench, db, log, "mllog", "types")
    assert done.returncode == 0, done.stdout + done.stderr
    err = done.stderr
    assert "result_0.txt:1: an event needs a text key and a numeric time_ms; left out" in err
    assert "result_0.txt:2: global_batch_size 'lots' is not a positive whole number; left out" in err
    assert "result_0.txt:3: eval_accuracy (a dict) holds no number; left out" in err
    assert "result_0.txt:4: submission_org is a list, not a text; left out" in err
    assert "result_0.txt:5: not valid JSON after :::MLLOG: Exceeds the limit (4300 digits)" in err
    assert "a block starts before run_start: no training of the run, left out" in err
    row = stored(db, "types")
    assert row["status"] == "ok" and row["samples_per_step"] == 1536 and row["metrics"]["eval_accuracy"] == 0.72


def test_a_log_of_a_thousand_bad_lines_keeps_twenty_warnings_and_counts_the_rest(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(":::MLLOG {not json\n" * 1000 + mlperf_log("success"))
    done = run_import(accelbench, db, log, "mllog", "many")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "many")
    assert len(row["warnings"]) == 22 and row["warnings"][20] == "... and 980 more warning(s) like these"
    assert row["warnings"][21].startswith("sequence length 128 from case gpt2_tiny")  # not a line's: kept
    assert done.stderr.count("warning: ") == 22


# ---------------------------------------------------------------- line length and time bounded


@pytest.fixture(scope="module")
def one_line_200mb(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "one-line.log"
    block = b"a" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(200):
            f.write(block)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_200mb_single_line_log_is_skipped_in_bounded_memory(one_line_200mb, tmp_path, fmt):
    code, out, err, took = run_bounded(["import", str(one_line_200mb), "--format", fmt, "--case-name", CASE,
                                        "--db", str(tmp_path / "r.db")], tmp_path, limit_s=30,
                                       rss_limit=160 * 2**20)
    assert code == 1, (out, err)
    assert "Traceback" not in out + err and "one-line.log: failed" in out and "no figure" in out
    assert (f"warning: {one_line_200mb}: 1 line(s) longer than the cap of 1,048,576 bytes skipped (the longest "
            f"209,715,200 bytes); to read such lines, raise the cap: {CAP}=<bytes>") in err


def test_a_long_line_inside_a_log_is_skipped_and_the_cap_can_be_raised_or_is_refused(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    lines = mlperf_log("success").splitlines(keepends=True)
    log.write_bytes("".join(lines[:8]).encode() + b"\xff\xfe" * (1 << 20) + b"\r\n" + "".join(lines[8:]).encode())
    done = run_import(accelbench, db, log, "mllog", "long")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 line(s) longer than the cap of 1,048,576 bytes skipped (the longest 2,097,153 bytes)" in done.stderr
    assert stored(db, "long")["status"] == "ok"
    done = run_import(accelbench, db, log, "mllog", "raised", extra_env={CAP: str(4 << 20)})
    assert done.returncode == 0 and "longer than the cap" not in done.stderr, done.stderr
    done = run_import(accelbench, db, log, "mllog", "bad-cap", extra_env={CAP: "lots"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"accelbench: error: {CAP}='lots' is not a positive whole number")


@pytest.mark.parametrize("fmt, line", [
    ("megatron", "iteration 1/2 |" + "a" * ((1 << 20) - 100)),
    ("megatron", "iteration 1/2 | x: " + "1" * ((1 << 20) - 100) + "x"),
    ("paddlenlp", "interval_samples_per_second " + "a" * ((1 << 20) - 100)),
    ("torchtitan", "step: 1 tps: 5 memory: " + "1" * ((1 << 20) - 100)),
    ("torchtitan", "step: 1 tps: 5 mfu: " + "1" * ((1 << 20) - 100)),
    ("nemo", "Epoch 0: :  1%| 1/2 [00:01<00:01, " + "k" * ((1 << 20) - 100) + "=1]"),
    ("paddleformers", "[x] - " + "a" * ((1 << 20) - 100) + " : 1"),
], ids=["megatron-word", "megatron-digits", "paddlenlp-word", "torchtitan-memory", "torchtitan-mfu", "nemo-bar",
        "paddleformers-argument"])
def test_a_megabyte_line_built_to_make_a_pattern_backtrack_takes_seconds(tmp_path, fmt, line):
    log = tmp_path / "hostile.log"
    log.write_text((line + "\n") * 3)
    code, out, err, took = run_bounded(["import", str(log), "--format", fmt, "--case-name", CASE,
                                        "--db", str(tmp_path / "r.db")], tmp_path, limit_s=30)
    assert "Traceback" not in out + err and code in (0, 1), (code, out, err)
    assert "hostile.log:" in out and took < 30


# ---------------------------------------------------------------- broken stamps, bytes and counts


def test_line_logs_with_impossible_dates_bytes_and_counts_are_read(accelbench, tmp_path):
    db = tmp_path / "r.db"
    garbage = b"\x00\xff\xfe\x80 not utf-8 \xc3\x28\n"
    megatron = tmp_path / "megatron.log"
    megatron.write_bytes(b"[2024-13-45 99:99:99] starting\n" + garbage
                         + f" iteration {'1' * 5000}/{'2' * 5000} | elapsed time per iteration (ms): 1.0 |\n".encode()
                         + (megatron_line("03:20", 10, 20000.0, 280.0, 3.0)
                            + megatron_line("05:40", 20, 14000.0, 400.0, 2.5)).encode())
    titan = tmp_path / "titan.log"
    titan.write_bytes(garbage + b"[rank0]:[titan] step: 2  tps: ,  tflops: ,\n"  # the warm-up line
                      + titan_line(99, 10, 12.25, 50.5, 3000, 1.0, 1.0).encode()  # second 99: no time
                      + titan_line(17, 20, 9.5, 52.31, 6000, 2.0, 1.0).encode())
    paddle = tmp_path / "workerlog.0"
    paddle.write_bytes(b"[2026-02-30 10:00:00,000] [    INFO] - ***** Running training *****\n" + garbage
                       + (paddle_line(1, 1, 7.0, 40.1, 60.0, 1.5625, 400.0)
                          + paddle_line(2, 2, 6.5, 41.6, 66.3, 10.15625, 2600.0)).encode())
    for fmt, log in (("megatron", megatron), ("torchtitan", titan), ("paddlenlp", paddle)):
        done = run_import(accelbench, db, log, fmt, f"dates-{fmt}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{log}: ok" in done.stdout
        row = stored(db, f"dates-{fmt}")
        assert row["status"] == "ok" and row["tokens_per_s_per_device"] > 0


# ---------------------------------------------------------------- figures that cannot be


def titan_log() -> str:
    return (titan_line(5, 1, 12.25, 50.5, 3000, 1.0, 1.0)
            + titan_line(17, 10, 9.5, 52.31, 6000, 1.0, 1.0).replace("tps: 6,000", "tps: -18,723"))


def gpt3_mllog() -> str:
    """MLPerf GPT-3's structure: epoch_count and train_samples count tokens, so epoch_count x train_samples
    (the epoch-counted rule) is tokens squared. Its blocks state no end; train_samples does not agree with them."""
    text = mllog("submission_benchmark", 0, "gpt3") + mllog("global_batch_size", 0, 2304)
    text += mllog("max_sequence_length", 0, 2048)
    text += mllog("run_start", 1)
    for k in range(3):
        text += mllog("block_start", 2 + 130 * k, first_epoch_num=51904512 * k, epoch_count=51904512)
        text += mllog("block_stop", 122 + 130 * k, first_epoch_num=51904512 * k, epoch_count=51904512)
    return text + mllog("train_samples", 400, 1258291200) + mllog("run_stop", 401, status="success")


CASES = {  # format, case, log text, what the reason must say, a stored figure that must be empty
    "negative-tokens": ("torchtitan", CASE, titan_log(), ["tokens/s/device -18,723 is negative",
                                                         "tokens/s total -18,723 is negative"], None),
    "inf-step-time": ("megatron", CASE, megatron_line("03:20", 10, 20000.0, 280.0, 3.0)
                      + megatron_line("05:40", 20, 14000.0, 400.0, 2.5).replace("14000.0", "inf"),
                      ["step time (median) is infinite"], "step_time_median_s"),
    "nan-tokens": ("paddlenlp", CASE, paddle_line(1, 1, 7.0, 40.1, 60.0, 1.5625, 400.0)
                   + paddle_line(2, 2, 6.5, 41.6, 66.3, 10.15625, "nan"),
                   ["tokens/s/device is nan (not a number)"], "tokens_per_s_per_device"),
    "negative-memory": ("paddlenlp", CASE, paddle_line(1, 1, 7.0, 40.1, 60.0, 1.5625, 400.0)
                        + paddle_line(2, 2, 6.5, -41.6, 66.3, 10.15625, 2600.0),
                        ["peak memory -4.46677e+10 bytes is negative"], None),
    "faster-than-peak": ("megatron", H100, megatron_line("03:20", 10, 20000.0, 280.0, 3.0)
                         + megatron_line("05:40", 20, 1.0, 400.0, 2.5),
                         ["step time (median) 0.001 s is shorter than", "at its declared peak of 989.5 TFLOP/s",
                          "MFU", "% is over 100 %"], None),
    "logged-mfu": ("torchtitan", CASE, titan_line(5, 1, 12.25, 50.5, 3000, 1.0, 1.0)
                   + titan_line(17, 10, 9.5, 52.31, 6000, 1.0, 150.0), ["MFU as logged 150 % is over 100 %"], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_impossible_figure_fails_the_import_naming_the_figure_and_its_bound(accelbench, tmp_path, name):
    fmt, case, text, says, empty = CASES[name]
    db, log = tmp_path / "r.db", tmp_path / f"{name}.log"
    log.write_text(text)
    done = run_import(accelbench, db, log, fmt, name, case)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{name}.log: failed" in done.stdout and "impossible figure(s): " in done.stdout
    row = stored(db, name)
    assert row["status"] == "failed"
    for needle in says:
        assert needle in row["reason"] and needle in done.stdout.replace("\n", ""), (needle, row["reason"])
    if empty:
        assert row[empty] is None  # a non-finite figure is stored empty; the reason keeps what the log said


def test_a_gpt3_shape_whose_blocks_do_not_add_up_has_no_throughput_and_fails(accelbench, tmp_path):
    """The observed import read epoch_count x train_samples (2.16e15 tokens/s/device, MFU 2.3e14 %). Here the
    three blocks' epoch_count (3 x 51,904,512 tokens) does not add up to train_samples at the end of the run
    (1,258,291,200): the last block would span 1,154,482,176 tokens, no whole number of its epoch_count, so no
    reading holds, none is stored, and the import fails saying why."""
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    log.write_text(gpt3_mllog())
    done = run_import(accelbench, db, log, "mllog", "gpt3", "gpt2_175b:torch:H100:64:8")
    assert done.returncode == 1
    row = stored(db, "gpt3")
    assert row["status"] == "failed" and row["tokens_per_s_per_device"] is None and row["mfu"] is None
    assert ("no throughput: a block spans 1,154,482,176 tokens by its positions, not a whole number of its "
            "epoch_count 51,904,512") in row["reason"]
    assert row["metrics"]["time_to_train_s"] == 400  # MLPerf's own figure, kept for the reader of the row


# ---------------------------------------------------------------- the parser's net, and accelbench's own rounds


def test_an_error_no_parser_foresaw_fails_the_log_not_the_command(tmp_path):
    @register("hostile_test", 1, "raises")
    def parse(path, world_size, skip_intervals=1):
        return {}["no such key"]

    try:
        result = PARSERS.get("hostile_test/1").parse(tmp_path / "x.log", 1, 1)
    finally:
        PARSERS.unregister("hostile_test/1")
    assert result.status == "failed"
    assert result.reason == ("the hostile_test/1 parser could not read this log (KeyError: 'no such key'); "
                             "nothing from it was kept")


def test_a_round_of_accelbench_faster_than_its_declared_peak_has_no_figures():
    r = rank_log(0, [1.0, 1.0, 0.5, 0.5], tokens=1_000_000)  # 12 TFLOP/s
    with pytest.raises(analyze.ImpossibleFigures) as caught:
        analyze.round_metrics([r], peak_tflops=10.0, peak_note="")
    assert "TFLOP/s/device 12 is over the declared peak of one device, 10 TFLOP/s" in str(caught.value)
    assert "MFU 120 % is over 100 %" in str(caught.value)
    assert "step time (median) 0.5 s is shorter than 0.6 s" in str(caught.value)
    assert analyze.round_metrics([r], peak_tflops=100.0, peak_note="").mfu == pytest.approx(0.12)
    assert isinstance(caught.value, analyze.NothingToMeasure)  # the round is failed as one with no figures

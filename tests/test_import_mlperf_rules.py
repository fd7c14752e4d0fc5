"""``accelbench import --format mllog`` through MLPerf's mlperf-logging and the benchmark table (issue 40): the
table covers MLPerf's benchmarks and refuses an uncited row, the package's compliance rules and result
summarizer give their verdicts, what the structures of the shared real files need (a block after run_stop,
FID and CLIP, a budget, a history length) is read right, and no layout is demanded where no figure needs one.
Every log is built here.
"""
from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from run_benchmarks.results.importers.parsers import get
from run_benchmarks.results.importers import mllog_events
from run_benchmarks.results.importers.mlperf_table import TABLE, parse, table

from .test_import_mlperf_property import T0, Writer, evaluation
from .test_importers import stored


def run(accelbench, db, log, run_id: str, *extra: str):
    return accelbench("import", str(log), "--format", "mllog", "--run-id", run_id, "--db", str(db), *extra)


# ---------------------------------------------------------------- the table


def test_the_table_has_every_benchmark_of_mlperf_loggings_rulesets_since_4_0_and_of_the_shared_files():
    from mlperf_logging import benchmark_meta

    names = {b for r in ("4.0", "4.1", "5.0", "5.1", "6.0", "6.1")
             for b in benchmark_meta.get_allowed_benchmarks("training", r)}
    names |= {"bert", "gpt3", "llama2_70b_lora", "llama31_405b", "llama31_8b", "gnn", "ssd", "retinanet",
              "stable_diffusion", "dlrm_dcnv2", "resnet", "unet3d", "maskrcnn"}
    missing = sorted(n for n in names if table().find(n) is None)
    assert not missing, missing
    for key, row in table().benchmarks.items():  # every reading cited (the model refuses a row that is not)
        assert row.sources["metrics"] and row.sources["train_samples"] and row.sources["tokens"], key
    assert table().find("gnn")[0] == "rgat" and table().find("ssd")[0] == "retinanet"


def test_a_row_that_cites_no_source_or_reads_epochs_it_cannot_size_is_refused_at_load():
    text = TABLE.read_text()
    uncited = text.replace('      tokens: "images: no tokens"\n      metrics: "mlperf-logging compliance_checker/'
                           'training_5.1.0/closed_retinanet.yaml', '      metrics: "mlperf-logging compliance_checker/'
                           'training_5.1.0/closed_retinanet.yaml', 1)
    with pytest.raises(ValueError, match=r"(?s)retinanet.*no source for tokens"):
        parse(uncited)
    unsized = text.replace("    train_samples: iterations_per_epoch\n", "    train_samples: unused\n", 1)
    with pytest.raises(ValueError, match="a reading in epochs needs train_samples per_epoch"):
        parse(unsized)


# ---------------------------------------------------------------- mlperf-logging: the extra, rules, summarizer


def lora_run(w: Writer, seconds: list[int], org: str = "acme", division: str = "closed") -> int:
    """A Llama 2 70B LoRA result that passes mlperf-logging's rules: the keys every round requires."""
    for key, value in (("cache_clear", True), ("submission_org", org), ("submission_platform", "8xA"),
                       ("submission_division", division), ("submission_status", "onprem"),
                       ("submission_benchmark", "llama2_70b_lora"), ("global_batch_size", 8),
                       ("opt_base_learning_rate", 4e-4), ("opt_learning_rate_training_steps", 1024),
                       ("opt_gradient_clip_norm", 0.3), ("opt_adamw_weight_decay", 1e-4),
                       ("gradient_accumulation_steps", 1), ("lora_alpha", 32), ("lora_rank", 16),
                       ("train_samples", 3901), ("eval_samples", 173)):
        w(key, 0, value)
    w("init_start", 0), w("init_stop", 1000), w("run_start", 1000)
    t, count = 1000, 0
    for k, ms in enumerate(seconds):
        w("block_start", t, samples_count=count), w("block_stop", t + ms, samples_count=count + 384)
        count += 384
        t = evaluation(w, t + ms, 8000, 0.95 - 0.01 * k, samples_count=count)
    w("run_stop", t, status="success", samples_count=count)
    return t - 1000


def test_a_log_that_passes_the_rules_names_the_ruleset_and_one_that_does_not_says_why(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    w = Writer()
    lora_run(w, [140_000, 30_000, 31_000, 30_000])
    log.write_text(w.text)
    assert run(accelbench, db, log, "pass").returncode == 0
    metrics = stored(db, "pass")["metrics"]
    assert metrics["mlperf_rules"].startswith("passes mlperf-logging's training 6.")
    log.write_text(w.text.replace('"lora_rank", "value": 16', '"lora_rank", "value": 8'))
    assert run(accelbench, db, log, "fail").returncode == 0  # the figures stand; the verdict is stored beside them
    rules = stored(db, "fail")["metrics"]["mlperf_rules"]
    assert rules.startswith("fails mlperf-logging's rules of every round that has this benchmark (6.1.0, 6.0.0, "
                            "5.1.0, 5.0.0, 4.1.0, 4.0.0)") and "v['value'] == 16" in rules
    shown = accelbench("show", "fail", "--db", str(db)).stdout
    assert "MLPerf rules: fails mlperf-logging's rules" in shown


def test_a_log_value_that_would_name_a_rules_file_is_never_handed_to_the_rules(tmp_path):
    """The rules load '{division}_common.yaml' and 'closed_{benchmark}.yaml' by the log's values: a path there
    would have the package load (and run the code of) a file of the log's choosing."""
    w = Writer()
    lora_run(w, [100_000, 30_000], division="../../../../tmp/evil")
    log = tmp_path / "result_0.txt"
    log.write_text(w.text)
    result = get("mllog").parse(log, None, 1)
    assert result.status == "ok" and result.metrics["samples_per_s"] == pytest.approx(384 / 30)
    assert result.metrics["mlperf_rules"].startswith("not checked: line ")
    assert "submission_division '../../../../tmp/evil' is no plain name" in result.metrics["mlperf_rules"]


def test_without_mlperf_logging_an_mllog_import_stops_with_the_install_line(accelbench, tmp_path, monkeypatch):
    w = Writer()
    lora_run(w, [100_000])
    log = tmp_path / "result_0.txt"
    log.write_text(w.text)
    monkeypatch.setitem(sys.modules, "mlperf_logging.compliance_checker.mlp_parser", None)  # import fails
    done = run(accelbench, tmp_path / "r.db", log, "none")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "needs MLPerf's mlperf-logging package, which is not installed" in done.stderr
    assert "pip install 'accelbench[mlperf]'" in done.stderr and not (tmp_path / "r.db").exists()


def test_a_folder_of_result_files_gets_the_result_summarizers_olympic_score(accelbench, tmp_path):
    folder, db = tmp_path / "llama2_70b_lora", tmp_path / "r.db"
    folder.mkdir()
    times = {}
    for i, first in enumerate((100_000, 300_000, 200_000)):
        w = Writer()
        times[f"result_{i}.txt"] = lora_run(w, [first, 30_000, 30_000, 30_000]) / 1000  # converges: 0.92
        (folder / f"result_{i}.txt").write_text(w.text)
    (folder / "notes.md").write_text("not a run")
    done = run(accelbench, db, folder, "folder")
    assert done.returncode == 0, done.stdout + done.stderr
    middle = sorted(times.values())[1]  # three runs: the fastest and the slowest dropped
    assert f"MLPerf score {middle / 60:,.2f} min" in done.stdout and "not an official score" in done.stdout
    from run_benchmarks.results.store.store import ResultStore

    with ResultStore(db) as store:
        rows = store.attempts({"run_id": "folder"})
    assert len(rows) == 3 and all(r["metrics"]["mlperf_score_s"] == pytest.approx(middle * 60 / 60) for r in rows)
    assert sorted(r["metrics"]["time_to_train_s"] for r in rows) == sorted(times.values())
    done = accelbench("import", str(folder), "--format", "megatron", "--db", str(db))
    assert done.returncode == 2 and "is a folder, and --format megatron/1 reads log files" in done.stderr


# ---------------------------------------------------------------- what the shared files' structures need


def test_stable_diffusion_scores_fid_and_clip_and_a_block_after_run_stop_is_no_training(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    w = Writer()
    w("submission_benchmark", 0, "stable_diffusion"), w("global_batch_size", 0, 1024), w("run_start", 0)
    for k in range(3):
        w("block_start", 100_000 * k, samples_count=512_000 * k)
        w("block_stop", 100_000 * (k + 1) - 10, samples_count=512_000 * (k + 1))
    w("block_start", 300_010, samples_count=1_536_000)  # past run_stop (the evaluation ran offline)
    w("block_stop", 400_000, samples_count=2_048_000)
    for metric, value in (("CLIP", 0.19), ("FID", 70.0)):  # the next block's evaluation, logged after run_stop
        w("eval_accuracy", 900_000, value, samples_count=2_048_000, metric=metric)
    for metric, value in (("FID", 79.1), ("CLIP", 0.186)):
        w("eval_accuracy", 300_000, value, samples_count=1_536_000, metric=metric)
    w("run_stop", 300_000, status="success", samples_count=1_536_000)
    log.write_text(w.text)
    done = run(accelbench, db, log, "sd")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FID 79.1, CLIP 0.186" in done.stdout
    metrics = stored(db, "sd")["metrics"]
    assert metrics["samples_per_s"] == pytest.approx(1_024_000 / 199.98, rel=1e-12)  # blocks 2 and 3, not 4
    assert metrics["eval_metrics"] == {"FID": 79.1, "CLIP": 0.186} and metrics["eval_accuracy"] == 79.1
    assert metrics["eval_goals"] == {"FID": "<= 90", "CLIP": ">= 0.15"}
    markdown = accelbench("report", "sd", "--db", str(db), "--format", "markdown").stdout
    assert "| FID 79.1; CLIP 0.186 |" in markdown


def test_a_recommenders_history_length_is_no_token_count_whatever_the_case_says(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    w = Writer()
    w("submission_benchmark", 0, "dlrmv4"), w("global_batch_size", 0, 4096), w("max_sequence_length", 0, 4096)
    w("run_start", 0)
    for k in range(3):
        w("block_start", 60_000 * k, samples_count=4096 * 100 * k)
        w("block_stop", 60_000 * (k + 1), samples_count=4096 * 100 * (k + 1))
    w("eval_accuracy", 180_001, 0.76, samples_count=4096 * 300), w("run_stop", 180_002, status="success")
    log.write_text(w.text)
    done = run(accelbench, db, log, "dlrm", "--case-name", "gpt3_6.7B:torch:H100:1:8")
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "dlrm")
    assert row["samples_per_s"] == pytest.approx(4096 * 100 / 60) and row["tokens_per_s_total"] is None
    assert any(w.startswith("no tokens/s: the benchmark table says a generative recommender") for w in row["warnings"])


def test_an_ssd_log_of_coco_images_is_refused_as_not_retinanets_batches(tmp_path):
    """'ssd' is RetinaNet from round 2.0 on (train_samples: batches of an epoch); SSD-ResNet34 logged COCO's
    images there. The dataset check tells them apart rather than read 117,266 x 1,024 samples an epoch."""
    w = Writer()
    w("submission_benchmark", 0, "ssd"), w("global_batch_size", 0, 1024), w("run_start", 0)
    w("train_samples", 1, 117266)
    for k in range(3):
        w("epoch_start", 100_000 * k, epoch_num=k), w("epoch_stop", 100_000 * (k + 1), epoch_num=k)
    w("eval_accuracy", 300_001, 0.23, epoch_num=3), w("run_stop", 300_002, status="success")
    log = tmp_path / "result_0.txt"
    log.write_text(w.text)
    result = get("mllog").parse(log, None, 1)
    assert result.status == "failed" and result.metrics.get("samples_per_s") is None
    assert ("train_samples 117,266 x global_batch_size 1,024 = 120,080,384 samples an epoch, but the benchmark's "
            "dataset holds 1,170,301") in result.reason
    assert result.metrics["time_to_train_s"] == pytest.approx(300.002)


def test_blocks_counting_epoch_count_with_the_evaluations_samples_import_with_their_throughput(tmp_path):
    """The regression of issue 40: blocks of first_epoch_num/epoch_count 1, evaluations with samples_count, no
    train_samples: each block ends at the count of the evaluation after it."""
    w = Writer()
    w("submission_benchmark", 0, "llama31_8b"), w("global_batch_size", 0, 32), w("run_start", 1)
    for k in range(5):
        w("block_start", 1 + 600_000 * k, first_epoch_num=k, epoch_count=1)
        w("block_stop", 600_000 * (k + 1), first_epoch_num=k)
        w("eval_accuracy", 600_000 * (k + 1), 3.6 - 0.08 * k, samples_count=12288 * (k + 1))
    w("run_stop", 3_000_010, status="success")
    log = tmp_path / "result_0.txt"
    log.write_text(w.text)
    result = get("mllog").parse(log, None, 1)
    assert result.status == "ok", result.reason
    assert result.metrics["samples_per_s"] == pytest.approx(4 * 12288 / (4 * 599.999), rel=1e-12)
    assert result.metrics["tokens_per_s_total"] == pytest.approx(result.metrics["samples_per_s"] * 8192)


def test_a_log_of_more_events_than_kept_has_no_interval_figures_and_no_compliance_run(tmp_path, monkeypatch):
    monkeypatch.setattr(mllog_events, "MAX_EVENTS", 12)
    monkeypatch.setattr(mllog_events, "MAX_CHECKED_LINES", 20)
    w = Writer()
    lora_run(w, [100_000] * 6)
    log = tmp_path / "result_0.txt"
    log.write_text(w.text)
    result = get("mllog").parse(log, None, 1)
    assert result.status == "failed" and "more than 12 training and evaluation events" in result.reason
    assert result.metrics.get("samples_per_s") is None
    assert result.metrics["mlperf_rules"].startswith("not checked: its MLLOG lines pass 20 or 32 MiB")


# ---------------------------------------------------------------- no layout demanded; samples/s in every report


def test_no_layout_stores_time_to_train_samples_and_score_and_reports_show_samples_per_s(accelbench, tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "result_0.txt"
    w = Writer()
    ttt = lora_run(w, [100_000, 30_000, 30_000]) / 1000
    log.write_text(w.text)
    done = run(accelbench, db, log, "bare")  # no case, no --nnodes, no :::SYSJSON
    assert done.returncode == 0, done.stdout + done.stderr
    row = stored(db, "bare")
    assert row["status"] == "ok" and (row["nnodes"], row["nprocs_per_node"]) == (1, 1)
    assert row["samples_per_s"] == pytest.approx(768 / 60) and row["tokens_per_s_per_device"] is None
    assert row["metrics"]["layout"].startswith("not stated") and row["metrics"]["time_to_train_s"] == ttt
    markdown = accelbench("report", "bare", "--db", str(db), "--format", "markdown").stdout
    header = next(line for line in markdown.splitlines() if line.startswith("| case | config |"))
    assert "| samples/s |" in header and "| 12.8 |" in markdown
    assert "its nodes and devices (1:1) are a placeholder" in markdown
    html = tmp_path / "r.html"
    assert accelbench("report", "bare", "--db", str(db), "--format", "html", "-o", str(html)).returncode == 0
    assert "12.8" in html.read_text() and "time to train" in html.read_text()
    (summary,) = csv.DictReader(io.StringIO(accelbench("report", "bare", "--db", str(db), "--format",
                                                       "summary-csv").stdout))
    assert float(summary["samples_per_s"]) == pytest.approx(768 / 60)
    (raw,) = json.loads(accelbench("report", "bare", "--db", str(db), "--format", "json").stdout)
    assert raw["samples_per_s"] == pytest.approx(768 / 60)
    assert json.loads(raw["eval_metrics"]) == {"eval loss": pytest.approx(0.93)}
    assert T0  # the generator's clock

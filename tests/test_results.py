"""The results store and what reads it: reports, compare, references, import, and the record reader.

Rows are made the way a run makes them: metrics computed by figures/analyze.py from perf records, written
through store_schema.row_from_document; the CLI runs in this process (the ``accelbench`` fixture).
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import perf_reader as records, rank_logs as collect
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.schema import row_from_document
from training.contract import perflog
from training.contract.perflog import EndRecord, StartRecord, StepRecord

from .conftest import ROOT, write


def metrics_for(step_time: float, tokens: int = 4096, world: int = 2, steps: int = 6, peak: float | None = 100.0,
                peak_note: str = "") -> dict:
    """A round's metrics, computed from perf records of ranks that each take ``step_time`` a step, MFU against
    ``peak`` (None: n/a, for ``peak_note``'s reason)."""
    ranks = []
    for rank in range(world):
        log = collect.RankLog(rank, start=StartRecord(
            rank=rank, local_rank=rank, node_rank=0, world_size=world, framework="torch", framework_version="2.13.0",
            device="cpu", precision="bf16", n_params=10, flops_per_token=6e6, flop_formula="6N", tokens_per_step=tokens),
            end=EndRecord(rank=rank, steps=steps, peak_memory_bytes=(100 + rank) * 2**20, memory_total_bytes=2**34,
                          memory_kind="rss"))
        for step in range(steps):
            log.series.add_record(StepRecord(rank=rank, step=step, warmup=step < 2, step_time_s=step_time,
                                             tokens=tokens, loss=5.0 - step * 0.1))
        ranks.append(log)
    return analyze.round_metrics(ranks, peak, peak_note, samples_per_step=8).to_dict()


def document(run_id: str, case: str, framework: str, step_time: float, round_: int = 1, status: str = "ok",
             config: str | None = None, hardware: str = "cpu", world: int = 2) -> dict:
    return {
        "run_id": run_id, "case_name": f"{case}:{framework}:{hardware}:1:{world}", "round": round_,
        "status": status, "reason": "" if status == "ok" else "node 0 exited with 1",
        "case": {"case": case, "framework": framework, "framework_version": "", "hardware": hardware,
                 "vendor": "cpu", "nnodes": 1, "nprocs_per_node": world, "world_size": world, "repeat": 1,
                 "extern_config": config, "extern_config_hash": None},
        "metrics": metrics_for(step_time, world=world) if status == "ok" else None,
        "workload": {"train": {"precision": "bf16"}},
        "environment": {"orchestrator": {"accelbench_commit": "abc123"}, "nodes": [{"node_rank": 0, "host": "h"}]},
        "started_at": f"2026-11-23T10:0{round_}:00+00:00", "ended_at": f"2026-11-23T10:0{round_}:30+00:00",
        "wall_time_s": 30.0, "warnings": [], "error_lines": [],
    }


def fill(db, docs) -> None:
    with ResultStore(db) as store:
        for run_id in dict.fromkeys(d["run_id"] for d in docs):
            store.begin_run(run_id, f"2026-11-23T10:00:0{len(run_id) % 10}+00:00", ["accelbench"], "abc123", "/logs")
        for doc in docs:
            store.add_attempt(row_from_document(doc))
        for run_id in dict.fromkeys(d["run_id"] for d in docs):
            store.end_run(run_id, "2026-11-23T11:00:00+00:00")


# ---------------------------------------------------------------- reading perf records


def test_records_survive_block_boundaries_foreign_lines_and_a_torn_line(tmp_path):
    path = tmp_path / "rank0.stdout.log"
    lines = ["loading data...\n"]
    for step in range(40):
        lines.append(perflog.format_record(StepRecord(rank=0, step=step, warmup=step < 3, step_time_s=0.5,
                                                      tokens=100, loss=1.0)) + "\n")
        if step == 17:
            lines.append("INFO some framework chatter " + "x" * 300 + "\n")
    lines.insert(25, perflog.PREFIX + '{"v":1,"kind":"step","rank":0,\n')  # a torn record (killed mid-write)
    path.write_text("".join(lines))
    problems: list[str] = []
    payloads = [p for batch in records.read_batches(path, problems, block_bytes=97) for p in batch]  # blocks smaller than a line
    assert [p["step"] for p in payloads] == list(range(40))
    assert problems == [f"{path}:26: perf record is not valid JSON: " + problems[0].split("JSON: ", 1)[1]]
    log = collect.read_rank(collect.RankLogs(0, path, tmp_path / "err"))
    assert log.steps_done == 40 and log.series.warmup == 3 and len(log.series.steps) == 37
    assert any(":26:" in p for p in log.problems)


def test_a_step_record_with_a_wrong_type_is_named_and_leaves_the_columns_aligned(tmp_path):
    path = tmp_path / "rank0.stdout.log"
    good = perflog.format_record(StepRecord(rank=0, step=0, warmup=False, step_time_s=0.5, tokens=100, loss=1.0))
    bad = good.replace('"step_time_s":0.5', '"step_time_s":"slow"').replace('"step":0', '"step":1')
    path.write_text(good + "\n" + bad + "\n")
    log = collect.read_rank(collect.RankLogs(0, path, tmp_path / "err"))
    assert list(log.series.steps) == [0] and list(log.series.times) == [0.5]
    assert any("step record" in p or "slow" in p for p in log.problems), log.problems


# ---------------------------------------------------------------- the store


def test_every_attempt_is_a_row_and_reads_back(tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("r1", "gpt3_tiny", "torch", 0.5), document("r1", "gpt3_tiny", "torch", 0.5, round_=2,
                                                                  status="failed")])
    with ResultStore(db) as store:
        rows = store.attempts(run_ids=[store.resolve_run("r")])
        assert [(a["round"], a["status"]) for a in rows] == [(1, "ok"), (2, "failed")]
        ok = rows[0]
        assert ok["tokens_per_s_per_device"] == pytest.approx(4096 / 0.5)
        assert ok["mfu"] == pytest.approx(6e6 * 4096 / 0.5 / 1e12 / 100)
        assert ok["peak_memory_bytes"] == 101 * 2**20 and ok["samples_per_s"] == pytest.approx(8 / 0.5)
        assert ok["metrics"]["flop_formula"] == "6N" and ok["accelbench_commit"] == "abc123"
        assert rows[1]["reason"] == "node 0 exited with 1"
        assert store.attempts({"status": "failed"})[0]["round"] == 2
        (run,) = store.runs()
        assert (run["attempts"], run["ok"], run["status"]) == (2, 1, "done")


_WRITER = """
import sys
from run_benchmarks.results.rounds.record import RoundRecord
from run_benchmarks.results.store.store import ResultStore
store = ResultStore(sys.argv[1])
store.begin_run("killed", "2026-11-23T10:00:00+00:00", [], None, None)
i = 0
while True:
    i += 1
    store.add_attempt(RoundRecord.model_validate({
        "run_id": "killed", "case_name": "c:torch:cpu:1:1", "round": i, "status": "ok",
        "case": {"case": "c", "framework": "torch", "hardware": "cpu", "nnodes": 1, "nprocs_per_node": 1,
                 "world_size": 1}, "metrics": {"tokens_per_s_per_device": float(i)}}).to_row())
    print(i, flush=True)
"""


def test_a_run_killed_with_sigkill_leaves_every_finished_attempt_readable(tmp_path):
    db = tmp_path / "results.db"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    committed = 0
    while committed < 50:
        committed = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with ResultStore(db) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = store.attempts(run_ids=["killed"])
        assert len(rows) >= committed  # every attempt it said was written is there
        assert [a["round"] for a in rows] == list(range(1, len(rows) + 1))
        assert store.run("killed")["status"] == "running"  # never ended: visible as such


# ---------------------------------------------------------------- reports


def test_report_formats(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("run-a", "gpt3_tiny", "torch", 0.50), document("run-a", "gpt3_tiny", "torch", 0.60, round_=2),
              document("run-a", "gpt3_tiny", "paddle", 0.40, config="/v/config_TP2PP1SH1SP1cpux1x2.yaml")])
    md = accelbench("report", "run-a", "--db", str(db), "--format", "markdown")
    assert md.returncode == 0, md.stderr
    table = [line for line in md.stdout.splitlines() if line.startswith("| gpt3_tiny |")]
    # torch: mean of 8192 and 6827 tokens/s/device; paddle 10240 -> +36% over the first row
    torch_mean = (4096 / 0.5 + 4096 / 0.6) / 2
    assert table[0].split(" | ")[:4] == ["| gpt3_tiny", "torch", "1x2 cpu", "8"]
    assert table[1].split(" | ")[1] == "paddle TP2PP1SH1SP1cpux1x2"
    assert table[1].endswith(f"| {4096 / 0.4 / torch_mean - 1:+.0%} |")
    # torch's two rounds: 8192 and 6827 tokens/s/device, mean 7509, coefficient of variation 12.9%
    assert table[0].split(" | ")[5] == f"{torch_mean:,.0f} ±12.9%"
    assert "± is the coefficient of variation over rounds" in md.stdout
    assert "tokens/s/device (model) varies" not in md.stdout
    (flagged,) = [line for line in md.stdout.splitlines() if "varies" in line]  # one flag for the case
    assert "across 2 rounds (> 5%)" in flagged  # 8192 vs 6827 tokens/s: 12.9% apart
    assert "tokens/s/device 12.9%" in flagged and "tokens/s total 12.9%" in flagged

    out = tmp_path / "report.html"
    html = accelbench("report", "run-a", "--db", str(db), "--format", "html", "-o", str(out))
    assert html.returncode == 0, html.stderr
    text = out.read_text()
    assert "http://" not in re.sub(r"http://www\.w3\.org/[\w/.]+", "", text)  # self-contained
    svgs = [ET.fromstring(s) for s in re.findall(r"<svg .*?</svg>", text, re.S)]
    bars = [g for g in svgs[0].iter("{http://www.w3.org/2000/svg}g") if re.fullmatch(r"bars0-bar-\d+", g.get("id", ""))]
    assert len(bars) == 2  # tokens/s per device of the one model: one bar per case
    assert any("step time over the run" in (s.get("aria-label") or "") for s in svgs)

    js = accelbench("report", "run-a", "--db", str(db), "--format", "json")
    rows = json.loads(js.stdout)
    assert len(rows) == 3 and rows[2]["framework"] == "paddle" and rows[2]["metrics"]["world_size"] == 2
    cs = accelbench("report", "framework=paddle", "--db", str(db), "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(cs.stdout)))
    assert float(row["tokens_per_s_per_device"]) == pytest.approx(4096 / 0.4)

    term = accelbench("report", "--db", str(db))
    assert term.returncode == 0 and "gpt3_tiny:paddle:cpu:1:2" in term.stdout
    show = accelbench("show", "run-", "--db", str(db))  # a unique prefix is enough
    assert show.returncode == 0 and "round 2 attempt 1: ok" in show.stdout
    assert "tokens/s/device: 6,827" in show.stdout and "samples/s: 16" in show.stdout


def test_html_plots_throughput_against_device_count_when_a_run_has_several(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("s", "gpt3_tiny", "torch", 0.5, world=1), document("s", "gpt3_tiny", "torch", 0.55, world=2),
              document("s", "gpt3_tiny", "torch", 0.6, world=4)])
    out = tmp_path / "scale.html"
    assert accelbench("report", "s", "--db", str(db), "--format", "html", "-o", str(out)).returncode == 0
    (chart,) = [c for c in re.findall(r"<svg .*?</svg>", out.read_text(), re.S) if "throughput against device count" in c]
    (line,) = [g for g in ET.fromstring(chart).iter("{http://www.w3.org/2000/svg}g") if g.get("id") == "scaling-series-0"]
    path = next(line.iter("{http://www.w3.org/2000/svg}path")).get("d")
    assert len(re.findall(r"[ML] ", path)) == 3  # 1, 2 and 4 devices, one line


def test_compare_frameworks_gives_the_speedup_per_matching_case(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("t", "gpt3_tiny", "torch", 0.5, config="/v/torch/config_X.yaml"),
              document("p", "gpt3_tiny", "paddle", 0.4, config="/v/paddle/config_X.yaml"),
              document("p", "llama_tiny", "paddle", 0.4)])
    done = accelbench("compare", "framework=torch", "framework=paddle", "--db", str(db), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| gpt3_tiny")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    # 0.5 s vs 0.4 s a step, every step alike: one round each, its interval the change itself
    assert cells[1:4] == ["8,192", "10,240", "+25% [+25%, +25%] (improvement)"]
    (other,) = [line for line in done.stdout.splitlines() if line.startswith("| llama_tiny")]
    assert "(no run)" in other
    runs_db = tmp_path / "runs.db"  # two runs of one case: paired by everything but the run
    fill(runs_db, [document("t", "gpt3_tiny", "torch", 0.5), document("t2", "gpt3_tiny", "torch", 0.4)])
    runs = accelbench("compare", "t", "t2", "--db", str(runs_db), "--format", "markdown")
    assert runs.returncode == 0, runs.stderr
    (row,) = [line for line in runs.stdout.splitlines() if line.startswith("| gpt3_tiny")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["8,192", "10,240", "+25% [+25%, +25%] (improvement)"]


def test_report_prints_the_runs_footnotes_and_every_row_keeps_its_mfu_basis(accelbench, tmp_path):
    db = tmp_path / "results.db"
    other = document("f", "llama_tiny", "torch", 0.5)
    other["metrics"]["flop_formula"] = "6N + attention"
    fill(db, [document("f", "gpt3_tiny", "torch", 0.5), other])
    done = accelbench("report", "f", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "MFU = " in done.stdout and "/ 100 TFLOP/s (bf16 peak)" in done.stdout  # was left out of report
    assert "FLOPs: 6N [gpt3_tiny:torch:cpu:1:2]" in done.stdout  # two formulas: each names its rows
    assert "FLOPs: 6N + attention [llama_tiny:torch:cpu:1:2]" in done.stdout
    rows = list(csv.DictReader(io.StringIO(accelbench("report", "f", "--db", str(db), "--format",
                                                      "summary-csv").stdout)))
    assert [(r["flop_formula"], r["mfu_peak_tflops"], r["mfu_peak_source"]) for r in rows] == [
        ("6N", "100.0", "datasheet"), ("6N + attention", "100.0", "datasheet")]


# ---------------------------------------------------------------- references


def test_references_pass_and_regress(accelbench, tmp_path, root):
    db = tmp_path / "results.db"
    fill(db, [document("r", "gpt3_tiny", "torch", 0.5)])  # 8192 tokens/s/device
    write(root / "cases/gpt3_tiny/references.yaml", """
references:
  - hardware: cpu
    nprocs_per_node: 2
    figures:
      tokens_per_s_per_device: {value: 8000, lower: 0.05, upper: 0.05, unit: tok/s}
""")
    ok = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "pass" in ok.stdout
    write(root / "vendors/cpu/references.yaml", """
references:
  - {case: gpt3_tiny, hardware: cpu, framework: torch, figures: {tokens_per_s_per_device: {value: 10000, lower: 0.1}}}
""")
    bad = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert bad.returncode == 3, bad.stdout + bad.stderr  # the vendor's entry wins: 8192 < 9000
    assert "FAIL (regression)" in bad.stdout
    write(root / "vendors/cpu/references.yaml", "references:\n  - {hardware: cpu, figures: {tok: {value: 1}}}\n")
    wrong = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert wrong.returncode == 2 and "references.yaml: references[0].figures: unknown figure 'tok'" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_check_with_no_matching_reference_says_so_and_exits_5(accelbench, tmp_path, root):
    db = tmp_path / "results.db"
    fill(db, [document("r", "gpt3_tiny", "torch", 0.5), document("r", "llama_tiny", "torch", 0.5)])
    nothing = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert nothing.returncode == 5, nothing.stdout + nothing.stderr  # was 0 having checked nothing
    assert "nothing checked" in nothing.stdout and "not checked: gpt3_tiny" in nothing.stdout
    assert "cases/gpt3_tiny/references.yaml (absent)" in nothing.stdout
    expected = accelbench("report", "--db", str(db), "--root", str(root), "--check", "--no-reference-expected")
    assert expected.returncode == 0 and "nothing checked" in expected.stdout
    # A vendor entry without case: checks every case on its hardware, and the table says so.
    write(root / "vendors/cpu/references.yaml", """
references:
  - {hardware: cpu, figures: {tokens_per_s_per_device: {value: 8000, lower: 0.5}}}
""")
    every = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert every.returncode == 0, every.stdout + every.stderr
    assert every.stdout.count("every case on cpu") == 2 and "not checked" not in every.stdout
    # One row matched, one not: the one not matched is named, the exit is the checks' own.
    write(root / "vendors/cpu/references.yaml", """
references:
  - {case: gpt3_tiny, hardware: cpu, figures: {tokens_per_s_per_device: {value: 8000, lower: 0.5}}}
""")
    some = accelbench("report", "--db", str(db), "--root", str(root), "--check")
    assert some.returncode == 0 and "not checked: llama_tiny" in some.stdout
    assert "case gpt3_tiny on cpu" in some.stdout


# ---------------------------------------------------------------- import


PADDLENLP_LINE = ("[2026-11-20 10:{minute:02d}:00,000] [    INFO] - loss: {loss}, learning_rate: 3e-05, global_step: "
                  "{step}, current_memory_allocated: 20.5, current_memory_reserved: 30.1, max_memory_allocated: "
                  "{mem}, max_memory_reserved: 31.0, interval_runtime: 10.0, interval_samples_per_second: {sps}, "
                  "interval_tokens_per_second_per_device: {tps}, interval_steps_per_second: 0.1, "
                  "progress_or_epoch: 0.01\n")


def test_import_paddlenlp_and_mllog_logs_beside_accelbench_runs(accelbench, tmp_path):
    db = tmp_path / "results.db"
    paddle_log = tmp_path / "workerlog.0"
    text = "[2026-11-20 10:00:00,000] [    INFO] - ***** Running training *****\n"
    for i, tps in enumerate((100.0, 2600.0, 2700.0)):  # the first interval is warm-up
        text += PADDLENLP_LINE.format(minute=i + 1, loss=7 - i, step=10 * (i + 1), mem=24.0 + i, sps=2.5 + i,
                                      tps=tps)
    paddle_log.write_text(text)
    done = accelbench("import", str(paddle_log), "--format", "paddlenlp", "--case-name",
                      "gpt3_6.7B:paddle_2.5.1:A100:1:8", "--extern-config", "config_TP1PP1SH2SP8A10080Gx1x8",
                      "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "2,650 tokens/s/device" in done.stdout
    with ResultStore(db) as store:
        (row,) = store.attempts({"framework": "paddle"})
    assert row["status"] == "ok" and row["tokens_per_s_per_device"] == pytest.approx(2650)
    assert row["tokens_per_s_total"] == pytest.approx(2650 * 8)
    assert row["samples_per_s"] == pytest.approx(4.0) and row["peak_memory_bytes"] == 26 * 2**30
    assert row["step_time_median_s"] == pytest.approx(10.0) and row["loss_last"] == 5
    assert row["source"] == "import:paddlenlp/1" and row["wall_time_s"] == 180

    mlperf = tmp_path / "mlperf.log"
    # (s, key, value, metadata): a warm-up block, 31 steps of 1,536 samples in 7,680 s; tracked_stats beside (issue 40)
    events = [(0, "run_start", None, {}), (0, "global_batch_size", 1536, {}), (0, "max_sequence_length", 2048, {}),
              (0, "submission_platform", "8xA100", {}), (0, "block_start", None, {"samples_count": 0}),
              (300, "block_stop", None, {"samples_count": 1536}), (300, "block_start", None, {"samples_count": 1536}),
              (7980, "block_stop", None, {"samples_count": 1536 * 32}), (7980, "tracked_stats", {"throughput": 6.3}, {}),
              (7981, "run_stop", None, {"status": "success"})]
    mlperf.write_text("".join(
        f':::MLLOG {json.dumps({"namespace": "", "time_ms": 1_763_600_000_000 + 1000 * t, "event_type": "POINT_IN_TIME", "key": k, "value": v, "metadata": md})}\n'
        for t, k, v, md in events))
    done = accelbench("import", str(mlperf), "--format", "mllog/1", "--case-name", "gpt3_13B:torch:A100:1:8",
                      "--db", str(db))
    assert done.returncode == 0, done.stderr
    with ResultStore(db) as store:
        (row,) = store.attempts({"case": "gpt3_13B"})
    # 6.2 samples/s of 13B at 2048 tokens on 8 A100s: ~130 TFLOP/s per device, under the 312 peak (a tenfold
    # figure is refused as impossible: tests/test_hostile_imports.py)
    assert row["samples_per_s"] == pytest.approx(6.2) and row["tokens_per_s_per_device"] == pytest.approx(6.2 * 2048 / 8)
    assert row["samples_per_step"] == 1536 and row["wall_time_s"] == 7981
    assert row["environment"]["submission_platform"] == "8xA100"

    broken = tmp_path / "broken.log"
    broken.write_text(mlperf.read_text().rsplit(":::MLLOG", 1)[0])  # no run_stop
    done = accelbench("import", str(broken), "--format", "mllog", "--case-name", "gpt3_13B:torch:A100:1:8",
                      "--db", str(db))
    assert done.returncode == 1 and "broken.log: failed" in done.stdout and "no run_stop event" in done.stdout
    bad = accelbench("import", str(broken), "--format", "maxtext", "--case-name", "x:torch:A100:1:8", "--db", str(db))
    assert bad.returncode == 2 and "no log parser 'maxtext'" in bad.stderr and "paddlenlp/1" in bad.stderr
    unknown = accelbench("import", str(mlperf), "--format", "mllog", "--case-name", "gpt3_175B:torch:A100:1:8",
                         "--db", str(db))
    assert unknown.returncode == 2 and "no case 'gpt3_175B'" in unknown.stderr and "gpt3_13B" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    runs = accelbench("runs", "--db", str(db))
    assert runs.stdout.count("import:") == 3


def test_large_logs_are_read_by_worker_processes_with_the_same_figures(tmp_path, monkeypatch):
    all_logs = []
    for rank in range(3):
        path = tmp_path / f"rank{rank}.stdout.log"
        start = StartRecord(rank=rank, local_rank=rank, node_rank=0, world_size=3, framework="torch",
                            framework_version="2.13.0", device="cpu", precision="fp32", n_params=10,
                            flops_per_token=6e6, flop_formula="6N", tokens_per_step=100)
        lines = [perflog.format_record(start)]
        lines += [perflog.format_record(StepRecord(rank=rank, step=s, warmup=s < 2, step_time_s=0.1 + 0.01 * rank + s * 1e-4,
                                                   tokens=100, loss=3.0)) for s in range(500)]
        lines.append(perflog.format_record(EndRecord(rank=rank, steps=500, peak_memory_bytes=1, memory_total_bytes=2,
                                                     memory_kind="rss")))
        path.write_text("\n".join(lines) + "\n")
        all_logs.append(collect.RankLogs(rank, path, tmp_path / "err"))
    serial = analyze.round_metrics(list(collect.read_ranks(all_logs)), None, "")
    monkeypatch.setattr(collect, "PARALLEL_BYTES", 0)  # every log counts as large
    parallel = list(collect.read_ranks(all_logs))
    assert [r.rank for r in parallel] == [0, 1, 2]
    assert analyze.round_metrics(parallel, None, "") == serial
    assert serial.step_time_s.max == pytest.approx(0.1 + 0.02 + 499e-4)  # the slowest rank sets each step

"""Every view of a stored round's contention (issue 41): ``--check`` leaves a contended row unjudged and exits 7
(unless a judged row failed: the README's exit table), ``report`` has a contention column, the JSON and CSV
exports carry the verdict with its figures and the rate's interval, ``show`` says it in one line and only
``show --verbose`` names pids; other runs' leftovers are one short line each; a peak calibrated after a run
gives that run's report an MFU against it, dated, instead of the advice to calibrate. Stored rows are made as
a run makes them (test_results.document: metrics from perf records)."""
from __future__ import annotations

import csv
import io
import json

from run_benchmarks.backends import cleanup
from run_benchmarks.catalog import measured_peaks

from .conftest import write
from .test_results import document, fill

BUSY_NODE = {"node_rank": 0, "host": "h", "measured": True, "covered_s": 3.2, "window": "measured steps",
             "cores": [0, 1], "machine_cpus": 2, "others_cpu_share": 0.63, "steal_share": 0.01,
             "memory_pressure_share": 0.0, "load_average": 4.1, "load_per_core": 2.05,
             "others": [{"pid": 4242, "name": "stress-ng", "cpu_s": 4.0, "share": 0.62}],
             "device_others": {"count": 1, "processes": [{"device": 0, "pid": 5151, "util_percent": 80.0,
                                                          "mem_used_bytes": 2**30}]}}
REASON = "others used 63% of the run's 2 core(s) (limit 25%)"
LEFTOVER = {"host": "h", "run": "20261125-101010", "owner": "h:4240:1", "alive": True, "pids": [7001, 7002],
            "cmd": "python -m training.run_pretraining"}


def contended(doc: dict) -> dict:
    doc["monitor"] = {"contention": {"verdict": "contended", "reasons": [REASON], "others_cpu_share": 0.63,
                                     "steal_share": 0.01, "memory_pressure_share": 0.0, "load_average": 4.1,
                                     "limits": {}, "nodes": [BUSY_NODE]}}
    doc["warnings"] = [f"contended over the measured steps: {REASON}: not judged"]
    doc["environment"]["leftovers"] = [LEFTOVER]
    return doc


def quiet(doc: dict) -> dict:
    doc["monitor"] = {"contention": {"verdict": "quiet", "reasons": [], "others_cpu_share": 0.02,
                                     "nodes": [{**BUSY_NODE, "others_cpu_share": 0.02, "others": [],
                                                "device_others": None}]}}
    return doc


def references(root, value: float = 8000) -> None:
    write(root / "cases/gpt3_tiny/references.yaml", f"""
references:
  - hardware: cpu
    figures:
      tokens_per_s_per_device: {{value: {value}, lower: 0.05, upper: 0.05, unit: tok/s}}
""")


def test_check_does_not_judge_a_contended_row_and_exits_7(accelbench, tmp_path, root):
    db = tmp_path / "results.db"
    fill(db, [contended(document("busy", "gpt3_tiny", "torch", 0.5)),  # 8192 tokens/s/device: in the band
              quiet(document("slow", "gpt3_tiny", "torch", 1.0, world=1)),  # 4096: a regression, another row
              contended(document("other", "llama_tiny", "torch", 0.5))])  # no reference for llama_tiny
    references(root)
    busy = accelbench("report", "busy", "--db", str(db), "--root", str(root), "--check")
    assert busy.returncode == 7, busy.stdout + busy.stderr
    out = " ".join(busy.stdout.split())
    assert f"not judged: contended (round 1: {REASON})" in out and "pass" not in out and "FAIL" not in out
    assert "--check: not judged: contended: 1 figure(s) of gpt3_tiny:torch:cpu:1:2" in out
    both = accelbench("report", "busy", "slow", "--db", str(db), "--root", str(root), "--check")
    assert both.returncode == 3, both.stdout  # a judged regression wins over a row not judged
    nothing = accelbench("report", "other", "--db", str(db), "--root", str(root), "--check")
    assert nothing.returncode == 5, nothing.stdout  # no reference: contention changes nothing to that


def test_report_and_exports_carry_the_verdict_its_figures_and_the_rates_interval(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [contended(document("busy", "gpt3_tiny", "torch", 0.5)), quiet(document("calm", "llama_tiny", "torch", 0.5)),
              document("old", "opt_tiny", "torch", 0.5)])  # from before contention was measured
    table = accelbench("report", "busy", "calm", "old", "--db", str(db))
    assert table.returncode == 0, table.stderr
    lines = {line.split("│")[1].strip(): line for line in table.stdout.splitlines() if line.startswith("│ ")
             and line.split("│")[1].strip()}
    assert lines["gpt3_tiny:torch:cpu:1:2"].rstrip(" │").endswith("contended")
    assert lines["llama_tiny:torch:cpu:1:2"].rstrip(" │").endswith("quiet")
    assert lines["opt_tiny:torch:cpu:1:2"].rstrip(" │").endswith("n/a")
    assert f"⚑ gpt3_tiny:torch:cpu:1:2 -: contended, not judged: round 1: {REASON}" in table.stdout
    md = accelbench("report", "busy", "--db", str(db), "--format", "markdown").stdout
    assert "| contention |" in md.splitlines()[5] + md and "| contended |" in md
    rows = {r["case"]: r for r in csv.DictReader(io.StringIO(accelbench("report", "busy", "calm", "--db", str(db),
                                                                         "--format", "csv").stdout))}
    assert rows["gpt3_tiny"]["contention"] == "contended" and rows["gpt3_tiny"]["contention_reasons"] == REASON
    assert float(rows["gpt3_tiny"]["others_cpu_share"]) == 0.63 and rows["llama_tiny"]["contention"] == "quiet"
    assert rows["gpt3_tiny"]["rate_interval95_low"] == "0.0"  # its steps were all alike
    raw = {r["case"]: r for r in json.loads(accelbench("report", "busy", "calm", "--db", str(db), "--format",
                                                       "json").stdout)}
    assert raw["gpt3_tiny"]["contention"] == "contended" and raw["gpt3_tiny"]["load_average"] == 4.1
    assert raw["gpt3_tiny"]["monitor"]["contention"]["nodes"][0]["others"][0]["pid"] == 4242  # whole, for programs
    summary = {r["case"]: r for r in csv.DictReader(io.StringIO(accelbench(
        "report", "busy", "calm", "--db", str(db), "--format", "summary-csv").stdout))}
    assert summary["gpt3_tiny"]["contention"] == "contended" and summary["llama_tiny"]["contention"] == "quiet"


def test_show_says_it_in_one_line_and_names_pids_only_when_verbose(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [contended(document("busy", "gpt3_tiny", "torch", 0.5))])
    shown = accelbench("show", "busy", "--db", str(db)).stdout
    assert f"contention: contended, not judged: {REASON}" in shown
    assert "noise of the rate: 95 % interval +0.0% .. +0.0% from its 4 steps resampled" in shown
    assert "4242" not in shown and "7001" not in shown and "5151" not in shown
    verbose = accelbench("show", "busy", "--db", str(db), "--verbose").stdout
    assert "node 0 (h): cores [0, 1], others 63% of 2 core(s), steal 1%, memory pressure 0%, load 4.1" in verbose
    assert "pid 4242 stress-ng: 4 s of CPU (62% of the cores)" in verbose
    assert "device 0: pid 5151, 80 % busy" in verbose
    assert "another run's processes at the start on h: run 20261125-101010, pids 7001, 7002" in verbose


def test_other_runs_leftovers_are_one_short_line_each_and_keep_their_pids_apart():
    found = [{"pid": p, "run": "r9", "owner": "h:1:1", "alive": False, "cmd": "python -m training.monitor"}
             for p in range(100, 140)]
    (line,) = cleanup.describe("h", found)
    assert line == ("another run's workers are still running on h: 40 process(es) (run r9; its orchestrator, pid 1 "
                    "on h, is gone; `accelbench clean` ends them); figures may be low")
    (group,) = cleanup.groups("h", found)
    assert group["pids"] == list(range(100, 140)) and group["run"] == "r9"


def test_a_peak_calibrated_after_a_run_gives_its_report_an_mfu_against_it(accelbench, tmp_path, root):
    db = tmp_path / "results.db"
    doc = document("old", "gpt3_tiny", "torch", 0.5)
    doc["metrics"]["mfu_measured_note"] = "no measured bf16 peak for cpu: run `accelbench calibrate cpu`"
    fill(db, [doc])
    before = accelbench("report", "old", "--db", str(db), "--root", str(root)).stdout
    assert "run `accelbench calibrate cpu`" in before and "calibrated since" not in before
    peak = measured_peaks.MeasuredPeak(tflops=2.0, shape=(2048, 2048, 2048), measured_at="2026-11-28T20:00:00+00:00",
                                       host="vm", command="accelbench calibrate cpu --dtype bf16",
                                       under_load=[REASON])
    measured_peaks.save(root / "vendors/cpu", measured_peaks.MeasuredPeaks(accelerators={"cpu": {"bf16": peak}}))
    after = accelbench("report", "old", "--db", str(db), "--root", str(root))
    assert after.returncode == 0, after.stderr
    text = " ".join(after.stdout.split())
    tflops = doc["metrics"]["tflops_per_device"]
    assert "MFU (peak calibrated since)" in text and f"{doc['metrics']['mfu']:.1%}" in text  # both, side by side
    assert f"{tflops / 2.0:.1%}" in text
    assert "the bf16 GEMM peak calibrated on vm at 2026-11-28T20:00:00+00:00, after these rounds ran" in text
    assert f"measured under contention ({REASON}): MFU (measured) may read high" in text
    assert "run `accelbench calibrate" not in text
    md = accelbench("report", "old", "--db", str(db), "--root", str(root), "--format", "markdown").stdout
    assert "MFU (peak calibrated since)" in md and "calibrated on vm at 2026-11-28T20:00:00+00:00" in md

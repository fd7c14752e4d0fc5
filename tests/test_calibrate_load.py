"""``accelbench calibrate`` under contention: the contention over the GEMM benchmark is measured as over a round's
steps (others' CPU beside it, against test_conf's limits) and recorded with each peak, marked; other runs' workers
found at the start are named in one short line without pids; the MFU (measured) note then says so in one short
clause. The GEMM is a stand-in here (a real process busy for a second, tagged as the benchmark is): what is
tested is the measurement around it."""
from __future__ import annotations

import os
import subprocess
import sys

import yaml

from run_benchmarks.catalog import measured_peaks
from run_benchmarks.cli import calibrate
from training.contract import perflog

from .conftest import write

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass"


def _gemm(argv, env=None):
    """The benchmark's stand-in: a process of its own, with the environment calibrate gives the benchmark."""
    subprocess.run([sys.executable, "-c", BUSY.format(s=1.5)], env=env, check=True)
    return [perflog.FigureRecord(rank=0, name="gemm.tflops", value=1.5, unit="TFLOP/s",
                                 params={"dtype": "fp32", "m": 2048, "n": 2048, "k": 2048})]


def _hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BUSY.format(s=30)], start_new_session=True) for _ in range(n)]


def test_calibrate_under_contention_marks_the_peak_and_says_so_in_one_short_line(accelbench, root, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", _gemm)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={
        **os.environ, "ACCELBENCH_JOB_TAG": "accelbench-test-calibrate", "ACCELBENCH_RUN_ID": "20200101-000000-calib",
        "ACCELBENCH_ORCHESTRATOR": "elsewhere:1:1"}, start_new_session=True)
    conf = write(root / "configs/strict.yaml", "contention: {others_cpu_share: 0.25}\n")  # a machine of its own
    hogs = _hogs(2 * (os.cpu_count() or 1))  # every core busy twice over: others past any limit of 25 %
    try:
        done = accelbench("calibrate", "cpu", "--root", str(root), "--test-conf", str(conf))
    finally:
        for proc in [orphan, *hogs]:
            proc.kill()
            proc.wait()
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "warning contended: others used" in out and "(limit 25%): the peak may read low" in out
    assert "warning another run's workers are still running on localhost: 1 process(es) (run 20200101-000000-calib" \
        in out
    assert str(orphan.pid) not in out  # pids are no warning's business
    saved = yaml.safe_load((root / "vendors/cpu/measured_peaks.yaml").read_text())["accelerators"]["cpu"]["fp32"]
    others = saved["contention"]["others_cpu_share"]
    assert others > 0.25 and any(line.startswith("others used") for line in saved["under_load"])
    peaks = measured_peaks.load(root / "vendors/cpu").accelerators["cpu"]
    _, note = measured_peaks.describe(peaks, "cpu", "fp32")
    clause = note.split("; ", 1)[1]
    assert clause.startswith("measured under contention (") and clause.endswith("MFU (measured) may read high")
    assert len(clause) < 260 and "\n" not in note and str(orphan.pid) not in note


def test_calibrate_on_a_machine_within_its_limits_marks_nothing(accelbench, root, monkeypatch):
    """This suite shares its cores with its other lanes: it says so (its limits), as a shared machine would."""
    monkeypatch.setattr(calibrate, "measure", _gemm)
    conf = write(root / "configs/shared.yaml", "contention: {others_cpu_share: null, steal_share: null, "
                                               "memory_pressure_share: null}\n")
    done = accelbench("calibrate", "cpu", "--root", str(root), "--test-conf", str(conf))
    assert done.returncode == 0 and "warning contended" not in done.stdout, done.stdout
    peak = measured_peaks.load(root / "vendors/cpu").accelerators["cpu"]["fp32"]
    assert peak.under_load == [] and peak.contention["others_cpu_share"] is not None
    assert "under contention" not in measured_peaks.describe({"fp32": peak}, "cpu", "fp32")[1]

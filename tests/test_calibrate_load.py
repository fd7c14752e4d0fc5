"""``accelbench calibrate`` under load: it warns as ``run`` does (other runs' workers here, a busy machine) and
records the load with each peak, which the MFU (measured) note then names."""
from __future__ import annotations

import os

import yaml

from run_benchmarks.backends import cleanup
from run_benchmarks.catalog import measured_peaks
from run_benchmarks.cli import calibrate
from training.contract import perflog

OTHER_RUN = ("another run's workers are still running on localhost: pids 4242 (run 20261125-101010, still running "
             "from pid 4240 on h); figures may be low")


def _gemm(*args, **kwargs):
    return [perflog.FigureRecord(rank=0, name="gemm.tflops", value=1.5, unit="TFLOP/s",
                                 params={"dtype": "fp32", "m": 2048, "n": 2048, "k": 2048})]


def test_calibrate_under_load_warns_and_records_the_load(accelbench, root, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", _gemm)
    monkeypatch.setattr(cleanup, "leftover_warnings", lambda hosts: [OTHER_RUN])
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 10.0, 8.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    done = accelbench("calibrate", "cpu", "--root", str(root))
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert f"warning {OTHER_RUN}: the peak may read low" in out
    assert "load average 12.0 on 16 logical CPUs before the benchmark started (over 25% of them)" in out
    saved = yaml.safe_load((root / "vendors/cpu/measured_peaks.yaml").read_text())["accelerators"]["cpu"]["fp32"]
    assert saved["load_average_1m"] == 12.0 and saved["cpu_count"] == 16 and saved["under_load"][0] == OTHER_RUN
    peaks = measured_peaks.load(root / "vendors/cpu").accelerators["cpu"]
    _, note = measured_peaks.describe(peaks, "cpu", "fp32")
    assert "measured under load (another run's workers" in note and "MFU (measured) may read high" in note


def test_calibrate_on_an_idle_machine_records_no_load_warning(accelbench, root, monkeypatch):
    monkeypatch.setattr(calibrate, "measure", _gemm)
    monkeypatch.setattr(cleanup, "leftover_warnings", lambda hosts: [])
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.3, 0.2))
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    done = accelbench("calibrate", "cpu", "--root", str(root))
    assert done.returncode == 0 and "warning" not in done.stdout
    peak = measured_peaks.load(root / "vendors/cpu").accelerators["cpu"]["fp32"]
    assert peak.under_load == [] and peak.load_average_1m == 0.4
    assert "under load" not in measured_peaks.describe({"fp32": peak}, "cpu", "fp32")[1]

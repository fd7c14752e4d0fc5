"""``python -m training.monitor`` as a process: an accelerator tool killed by a signal, with no stop of the
monitor's own following, ends that sampler (named in the status file) while the host sampler goes on."""
from __future__ import annotations

import json
import subprocess
import sys

from training.contract.names import MONITOR_HOST_FILE, MONITOR_STATUS_FILE
from training.contract.spec import WorkerConfig

from .conftest import ROOT

# The first call (the monitor's opening check) answers one device; every later call is killed by SIGTERM.
TOOL = """
import os, signal, sys
marker = sys.argv[1]
if os.path.exists(marker):
    os.kill(os.getpid(), signal.SIGTERM)
open(marker, "w").close()
print("0, 42")
"""


def test_a_killed_tool_ends_its_sampler_and_the_monitor_goes_on(tmp_path):
    monitor = {"command": [sys.executable, "-c", TOOL, str(tmp_path / "called")], "format": "csv",
               "columns": ["index", "util_percent"]}
    config = WorkerConfig.model_validate({
        "workload": {"model": {"n_layer": 1, "n_head": 1, "d_model": 8, "vocab_size": 16, "seq_len": 4},
                     "train": {"micro_batch_size": 1, "steps": 1, "warmup_steps": 0}},
        "runtime": {"case_name": "t", "run_id": "t", "round": 1, "framework": "torch",
                    "device": {"kind": "testkind", "monitor": monitor}}})
    (tmp_path / "config.json").write_text(config.model_dump_json())
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "training.monitor", "--config", str(tmp_path / "config.json"),
                           "--out", str(out), "--interval", "0.2", "--duration", "4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    status = json.loads((out / MONITOR_STATUS_FILE).read_text())
    assert status["accelerator"].startswith("stopped: ") and "killed by signal 15" in status["accelerator"]
    host = [json.loads(line) for line in (out / MONITOR_HOST_FILE).read_text().splitlines()]
    # the host sampler outlived the accelerator's end: the wait for a stop (2 s) passed, then sampling went on
    assert len(host) >= 12, len(host)

"""Vendor tooling that used to fail silently: a monitor's ``columns`` that do not fit its tool's CSV, impossible
readings, a device-count pattern that matches nothing, and ``vendor check`` running the tools it can."""
from __future__ import annotations

import json
import shutil
import sys
from types import SimpleNamespace

import pytest

from run_benchmarks.catalog.kinds import DeviceCountSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks.execute import monitoring
from run_benchmarks.execute.preflight import Preflight
from training.contract import readings
from training.contract.spec import CommandMonitorSpec
from training.monitor import Unavailable, command

from .conftest import write

SEVEN_FIELDS = "0, NVIDIA H100, 97, 61234, 81559, 642.17, 45\n1, NVIDIA H100, 0, 4, 81559, 71.3, 30\n"


def _csv(*columns: str) -> CommandMonitorSpec:
    return CommandMonitorSpec(command=("nvidia-smi", "--format=csv,noheader,nounits"), format="csv",
                              columns=columns, scale={"mem_used_bytes": 2**20, "mem_total_bytes": 2**20})


def test_columns_one_name_short_of_the_tools_fields_are_refused_not_misread():
    # 6 names for 7 fields: before, the memory total (81559 MiB) was read as power and summed to 131,072 W
    six = _csv("index", "name", "util_percent", "mem_used_bytes", "power_w", "temp_c")
    with pytest.raises(Unavailable, match=r"printed 7 field\(s\) on a line, but the monitor's columns name 6"):
        command.parse(six, SEVEN_FIELDS)
    seven = _csv("index", "name", "util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")
    first, _ = command.parse(seven, SEVEN_FIELDS)["devices"]
    assert first["power_w"] == 642.17 and first["mem_total_bytes"] == 81559 * 2**20


def test_one_line_of_another_field_count_is_refused_and_the_others_read():
    seven = _csv("index", "name", "util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")
    sample = command.parse(seven, SEVEN_FIELDS + "2, NVIDIA H100, 97, 61234\n")
    assert [d["index"] for d in sample["devices"]] == [0, 1]
    (why,) = sample["refused"]
    assert "printed 4 field(s) on a line, but the monitor's columns name 7" in why and "61234" in why


def test_the_sampler_stops_on_wrong_columns_but_not_on_one_odd_output_after_good_ones(monkeypatch):
    seven = _csv("index", "name", "util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")
    outputs = []
    monkeypatch.setattr(command.subprocess, "run", lambda *a, **k: SimpleNamespace(
        returncode=0, stdout=outputs.pop(0), stderr=""))
    outputs[:] = ["0, H100, 97\n1, H100, 0\n"]  # every line short from the first sample: wrong columns
    with pytest.raises(Unavailable, match="printed 3 field"):
        command.open(seven)
    outputs[:] = [SEVEN_FIELDS, "0, H100, 97\n", SEVEN_FIELDS]  # opened, one odd output, then good again
    sampler = command.open(seven)
    odd = sampler.sample()
    assert odd["devices"] == [] and "printed 3 field(s)" in odd["refused"][0]
    assert len(sampler.sample()["devices"]) == 2  # still sampling


def test_impossible_readings_are_refused_and_named():
    spec = _csv("index", "util_percent", "mem_used_bytes", "mem_total_bytes", "power_w")
    sample = command.parse(spec, "0, 120, 90000, 81559, 131072\n1, 50, 1000, 81559, 300\n")
    bad, good = sample["devices"]
    assert bad["util_percent"] is None and bad["power_w"] is None and bad["mem_used_bytes"] is None
    assert good["power_w"] == 300 and good["util_percent"] == 50
    assert sample["refused"] == ["device 0: utilisation 120 % (not within 0-100 %)",
                                 f"device 0: power 131,072 W (over the {readings.POWER_BOUND_W:,.0f} W bound of any "
                                 "accelerator)",
                                 f"device 0: memory used {90000 * 2**20:,} B over the total {81559 * 2**20:,} B"]
    # any sampler's sample (NVML's too) goes through the same check in the monitor's loop
    assert readings.check({"devices": [{"index": 0, "power_w": -5.0}]})["refused"] == ["device 0: power -5 W (negative)"]


def test_refused_readings_reach_the_runs_warnings(tmp_path):
    folder = tmp_path / "monitor"
    folder.mkdir()
    (folder / "status.json").write_text('{"interval_s": 1, "host": "ok (host)", "accelerator": "ok (command: smi)"}')
    lines = [{"t": 1000.0 + t, "devices": [{"index": 0, "util_percent": 50, "power_w": None}],
              "refused": ["device 0: power 131,072 W (over the 2,000 W bound of any accelerator)"]} for t in range(3)]
    (folder / "accelerator.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    node, warnings = monitoring.summarize_node(folder)
    (warning,) = warnings
    assert "refused 3 impossible or unreadable reading(s)" in warning and "power 131,072 W" in warning
    assert node["devices"][0]["power_w"] is None  # no figure made of them


def test_a_device_count_pattern_that_matches_nothing_says_so_with_the_tools_lines():
    counter = DeviceCountSpec(command=("acme-smi", "--list"), pattern=r"^NPU (\d+):")
    output = "Device 0: Acme X1 (bus 0000:01)\nDevice 1: Acme X1 (bus 0000:02)\n"
    assert counter.count(output) == 0
    assert counter.unmatched(output) == ("device_count pattern '^NPU (\\\\d+):' matched none of the 2 line(s) "
                                         "`acme-smi --list` printed; its first lines: Device 0: Acme X1 (bus "
                                         "0000:01) | Device 1: Acme X1 (bus 0000:02)")
    assert counter.unmatched("") is None and counter.unmatched("NPU 0: x\n") is None

    class Host:
        name = "n1"

        def free_bytes(self, folder):
            return None

        def run(self, argv):
            return SimpleNamespace(returncode=0, stdout=output, stderr="")

    preflight = object.__new__(Preflight)
    preflight.hosts, preflight.device_counts = {"n1": Host()}, {}
    case = SimpleNamespace(hardware=SimpleNamespace(kind=SimpleNamespace(device_count=(counter,)),
                                                    spec=SimpleNamespace(kind="acme")))
    node = SimpleNamespace(python="python3", cwd="/w", env={})
    with pytest.raises(PreflightError) as refused:
        preflight._check_resources(("n1", ("/w", 2, [(2, node, case)])))
    assert "matched none of the 2 line(s)" in refused.value.message and "lists 0" not in refused.value.message
    assert "Device 0: Acme X1" in refused.value.message and "pattern" in refused.value.fix


ACME = """description: Acme accelerators
kinds:
  acme:
    torch_device: cuda
    paddle_device: gpu
    visible_devices_env: ACME_VISIBLE_DEVICES
    device_count:
      - command: [PYTHON, -c, "print('Device 0: Acme X1'); print('Device 1: Acme X1')"]
        pattern: '{pattern}'
    backends: {{torch: nccl}}
    monitor:
      command: [PYTHON, -c, "print('0, X1, 40, 1024, 65536, 70.5, 41'); print('1, X1, 0, 4, 65536, 60, 39')"]
      format: csv
      columns: [{columns}]
      scale: {{mem_used_bytes: 1048576, mem_total_bytes: 1048576}}
accelerators:
  X1:
    kind: acme
    memory_gib: 64
    dies_per_device: 1
    peak_tflops: {{fp32: 10, fp16: 100, bf16: 100}}
    unsupported_dtypes: [tf32, fp8]
    interconnect: none
frameworks:
  torch: {{env: {{}}}}
"""


def _acme(root, pattern: str, columns: str):
    shutil.rmtree(root / "vendors" / "template")
    write(root / "vendors/acme/vendor.yaml", ACME.format(pattern=pattern, columns=columns)
          .replace("PYTHON", sys.executable))
    write(root / "vendors/acme/docker/torch_2.13/Dockerfile", "FROM scratch\n")


def test_vendor_check_runs_the_kinds_tools_and_shows_what_it_parsed(accelbench, root):
    _acme(root, r"^Device (\d+):", "index, name, util_percent, mem_used_bytes, mem_total_bytes, power_w, temp_c")
    done = accelbench("vendor", "check", "acme", "--root", str(root), "--run-tools")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kinds.acme.device_count[0]" in done.stdout and "lists 2 device(s) here" in done.stdout
    out = " ".join(done.stdout.split())
    assert ("parsed 2 device(s): device 0 (X1): util_percent 40, mem_used_bytes 1.0 GiB, mem_total_bytes 64.0 GiB, "
            "power_w 70.5, temp_c 41; device 1 (X1)") in out, out


def test_vendor_check_names_a_pattern_that_matches_nothing_and_columns_that_do_not_fit(accelbench, root):
    _acme(root, r"^NPU (\d+):", "index, name, util_percent, mem_used_bytes, power_w, temp_c")
    done = accelbench("vendor", "check", "acme", "--root", str(root), "--run-tools")
    assert done.returncode == 1
    out = " ".join(done.stdout.split())
    assert "matched none of the 2 line(s)" in out and "its first lines: Device 0: Acme X1 | Device 1: Acme X1" in out
    assert "printed 7 field(s) on a line, but the monitor's columns name 6" in out


def test_vendor_check_runs_no_tool_without_run_tools(accelbench, root, tmp_path):
    # a contributed vendor.yaml can name any command: reviewing it must not run it
    marker = tmp_path / "ran"
    _acme(root, r"^Device (\d+):", "index, name, util_percent, mem_used_bytes, mem_total_bytes, power_w, temp_c")
    yaml = root / "vendors/acme/vendor.yaml"
    yaml.write_text(yaml.read_text().replace("print('Device 0: Acme X1')", f"open({str(marker)!r}, 'w')"))
    done = accelbench("vendor", "check", "acme", "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()
    out = " ".join(done.stdout.split())
    assert "not run: kinds.acme.device_count[0]" in out and "not run: kinds.acme.monitor" in out
    assert "--run-tools" in out and "lists 2 device(s)" not in out


def test_a_tool_past_its_timeout_is_killed_with_the_grandchild_it_forked(tmp_path):
    import time
    from pathlib import Path

    from run_benchmarks.cli import vendor_probe

    pid_file = tmp_path / "pid"
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    started = time.monotonic()
    code, _, err = vendor_probe._run([sys.executable, "-c", script], timeout_s=0.5)
    assert code == -1 and "killed with every process it started" in err, err and time.monotonic() - started < 5
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # killed: gone, or a zombie until whatever adopted it reaps it
        try:
            if Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"grandchild {grandchild} outlived the timeout")


def test_a_tools_output_is_read_up_to_the_cap(monkeypatch):
    from run_benchmarks.cli import vendor_probe

    monkeypatch.setenv("ACCELBENCH_MAX_TOOL_OUTPUT_BYTES", "100")
    code, out, _ = vendor_probe._run([sys.executable, "-c", "print('x' * 10000)"])
    assert code == 0 and out == "x" * 100

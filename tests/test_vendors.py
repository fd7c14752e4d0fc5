"""Vendor plugins: the shipped vendors check clean, a scaffold lists what is left, bad configs are
named file by file, containers get least privilege, and the monitors sample and summarise.

The NVML sampler is the one place with a stand-in: no NVIDIA GPU exists here, so it reads a small
object with NVML's call names; rocm-smi's parser reads output in rocm-smi's JSON format. Both run
against real devices where a machine has them (docs/benchmarks.md).
"""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from run_benchmarks.backends.runtimes import docker as containers
from run_benchmarks.execute import monitoring
from run_benchmarks.catalog.vendors import ContainerOptions, VendorRegistry
from training.monitor import Unavailable, nvml, rocm_smi

from .conftest import ROOT, write


# ---------------------------------------------------------------- vendor folders


def test_shipped_vendors_check_clean_and_declare_their_peaks(accelbench):
    done = accelbench("vendor", "check")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("amd", "cpu", "nvidia"):
        assert f"vendor {name}: ok" in done.stdout
    hardware = VendorRegistry(ROOT / "vendors").hardware
    assert hardware["H100"].spec.peak_tflops["bf16"] == 989.5 and hardware["MI300X"].spec.peak_tflops["fp8"] == 2614.9
    assert "fp8" in hardware["A100"].spec.unsupported_dtypes and "template" not in VendorRegistry(ROOT / "vendors").vendors


def fill_template(text: str) -> str:
    """A new vendor's vendor.yaml with every placeholder value filled in as a vendor engineer would (an xpu
    kind, real-looking peaks), its comments left as they are."""
    text = text.replace("description: TODO one line on the accelerators and how frameworks reach them",
                        "description: Acme X1").replace("TODO_VISIBLE_DEVICES", "ACME_VISIBLE_DEVICES")
    text = text.replace("interconnect: TODO e.g. 8-way mesh, 400 GB/s per device", "interconnect: mesh")
    text = text.replace("memory_gib: null", "memory_gib: 64").replace("dies_per_device: null", "dies_per_device: 1").replace(
        "peak_tflops: {}  ", "peak_tflops: {fp32: 60, fp16: 480, bf16: 480}").replace(
        "unsupported_dtypes: []", "unsupported_dtypes: [tf32, fp8]")
    for placeholder, value in (("TODO_TORCH_DEVICE", "xpu"), ("TODO_PADDLE_DEVICE", "xpu"),
                               ("[TODO_SMI_TOOL, --list]", "[xpu-smi, --list]"), ("TODO_BACKEND", "xccl"),
                               ("'^TODO (", "'^Device (")):
        text = text.replace(placeholder, value)
    return text


def test_a_new_vendor_starts_from_the_template_and_check_lists_what_is_left(accelbench, root):
    done = accelbench("vendor", "new", "acme", "--root", str(root))
    assert done.returncode == 0, done.stderr
    folder = root / "vendors/acme"
    assert (folder / "docker/torch_2.13/Dockerfile").is_file()
    assert (folder / "gpt3_tiny/torch/config_acme_accx1x2.yaml").is_file()  # placeholder renamed in paths too
    check = accelbench("vendor", "check", "acme", "--root", str(root))
    assert check.returncode == 1
    assert f"{folder / 'vendor.yaml'}" in check.stdout and "still says TODO" in check.stdout
    assert "no dense peak for fp32, tf32, fp16, bf16, fp8" in check.stdout  # no placeholder peak passes as real
    # Fill in the placeholders as a vendor engineer would, leaving the template's comments (and their
    # commented examples naming TODO_SMI_TOOL) where they are: the check passes.
    text = fill_template((folder / "vendor.yaml").read_text())
    kept = [line for line in text.splitlines() if "TODO" in line]
    assert kept and all("#" in line.split("TODO")[0] for line in kept)  # only in comments now
    (folder / "vendor.yaml").write_text(text)
    check = accelbench("vendor", "check", "acme", "--root", str(root))
    assert check.returncode == 0, check.stdout
    again = accelbench("vendor", "new", "acme", "--root", str(root))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_check_names_each_bad_file_and_its_fix(accelbench, root):
    nvidia = root / "vendors/nvidia"
    good = nvidia / "gpt3_6.7B/paddle/config_TP2PP4SH1SP1A10080Gx1x8.yaml"
    (nvidia / "gpt3_6.7B/paddle/config_TP2PP4SH1SP1A10080Gx1x4.yaml").write_text(good.read_text())
    write(nvidia / "gpt3_6.7B/paddle/config_unnamed.yaml", "train: {micro_batch_size: 1}\n")
    write(nvidia / "gpt3_6.7B/paddle/config_FASTA100x1x8.yaml", "train: {lr: 1.0}\n")
    vendor = nvidia / "vendor.yaml"
    vendor.write_text(vendor.read_text().replace("    unsupported_dtypes: [fp8]\n", "", 1))
    done = accelbench("vendor", "check", "nvidia", "--root", str(root))
    assert done.returncode == 1
    out = done.stdout
    assert "config_TP2PP4SH1SP1A10080Gx1x4.yaml" in out and "runs 1 node(s) x 4 process(es) = 4" in out
    assert "config_unnamed.yaml" in out and "<accelerator>x<nnodes>x<nprocs>" in out
    assert "config_FASTA100x1x8.yaml" in out and "departs from its case's policy: train.lr 1" in out
    assert "accelerators.A100_40G.peak_tflops: no dense peak for fp8" in out
    assert "Traceback" not in done.stderr


def test_containers_get_least_privilege_unless_the_vendor_asks():
    plain = containers.privileges(ContainerOptions(cap_add=["IPC_LOCK"], ulimits={"memlock": -1}))
    assert plain["cap_drop"] == ["ALL"] and plain["cap_add"] == ["IPC_LOCK"]
    assert plain["security_opt"] == ["no-new-privileges"] and "privileged" not in plain
    assert (plain["ulimits"][0]["Name"], plain["ulimits"][0]["Soft"], plain["ulimits"][0]["Hard"]) == ("memlock", -1, -1)
    assert containers.privileges(ContainerOptions(privileged=True))["privileged"] is True


# ---------------------------------------------------------------- monitors


def test_the_monitor_process_samples_host_and_cpu(tmp_path):
    out = tmp_path / "monitor"
    subprocess.run([sys.executable, "-m", "training.monitor", "--accelerator", "cpu", "--interval", "0.2",
                    "--duration", "1.5", "--out", str(out)], cwd=ROOT, check=True, timeout=60)
    summary, warnings = monitoring.summarize_node(out)
    assert warnings == []
    assert summary["status"]["host"] == "ok (host)" and summary["status"]["accelerator"] == "ok (cpu)"
    assert 0 <= summary["host"]["cpu_percent"]["mean"] <= 100 and summary["host"]["mem_total_bytes"] > 2**30
    (cpu,) = summary["devices"]
    assert cpu["name"] == "cpu" and 0 <= cpu["util_percent"]["max"] <= 100
    assert summary["duration_s"] >= 1.0


def test_a_monitor_that_cannot_start_is_a_warning(tmp_path):
    out = tmp_path / "monitor"
    subprocess.run([sys.executable, "-m", "training.monitor", "--accelerator", "rocm-smi", "--interval", "0.2",
                    "--duration", "0.5", "--out", str(out)], cwd=ROOT, check=True, timeout=60)
    summary, warnings = monitoring.summarize_node(out)
    assert summary["host"]  # the host monitor still ran
    assert warnings and warnings[0].startswith("accelerator monitor unavailable (rocm-smi): rocm-smi is not on PATH")
    _, warnings = monitoring.summarize_node(tmp_path / "never-started")
    assert "the monitor left nothing" in warnings[0]


class _Nvml:
    """NVML's Python binding's call names, answering for two GPUs (no NVIDIA GPU in CI)."""
    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    class NVMLError(Exception):
        pass

    def __init__(self, fail_init=False):
        self.fail_init = fail_init

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=90 + h, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=(10 + h) * 2**30, total=80 * 2**30, free=0)

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000 + 1000 * h  # mW

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 60 + h

    def nvmlDeviceGetClockInfo(self, h, clock):
        if clock == self.NVML_CLOCK_MEM:
            raise self.NVMLError("Not Supported")
        return 1980


def test_nvml_sampler_reads_every_field_and_tolerates_unsupported_ones():
    sample = nvml.open(_Nvml()).sample()
    first, second = sample["devices"]
    assert first == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "util_percent": 90, "mem_used_bytes": 10 * 2**30,
                     "mem_total_bytes": 80 * 2**30, "power_w": 650.0, "temp_c": 60, "sm_clock_mhz": 1980,
                     "mem_clock_mhz": None, "processes": None}  # a binding that cannot list processes
    assert second["power_w"] == 651.0
    with pytest.raises(Unavailable, match="NVML did not start: Driver Not Loaded"):
        nvml.open(_Nvml(fail_init=True))


ROCM_SMI_JSON = json.dumps({
    "card0": {"GPU use (%)": "97", "Current Socket Graphics Package Power (W)": "512.0",
              "Temperature (Sensor edge) (C)": "55.0", "Temperature (Sensor junction) (C)": "71.0",
              "VRAM Total Memory (B)": str(192 * 2**30), "VRAM Total Used Memory (B)": str(150 * 2**30)},
    "card1": {"GPU use (%)": "95", "Average Graphics Package Power (W)": "498.5",
              "Temperature (Sensor edge) (C)": "53.0"},
    "system": {"Driver version": "6.8.5"},
})


def test_rocm_smi_output_parses_across_key_spellings():
    first, second = rocm_smi.parse(ROCM_SMI_JSON)["devices"]
    assert first == {"index": 0, "util_percent": 97.0, "power_w": 512.0, "temp_c": 55.0,
                     "mem_used_bytes": 150 * 2**30, "mem_total_bytes": 192 * 2**30}
    assert (second["power_w"], second["mem_total_bytes"]) == (498.5, None)
    with pytest.raises(Unavailable):
        rocm_smi.parse("ERROR: No AMD GPUs specified")


def test_samples_become_per_device_figures_energy_and_tokens_per_joule(tmp_path):
    """Two GPUs sampled at t = 0, 1, 2 s: 100 -> 200 -> 200 W and a constant 300 W."""
    folder = tmp_path / "monitor"
    folder.mkdir()
    (folder / "status.json").write_text('{"interval_s": 1, "host": "ok (host)", "accelerator": "ok (nvml)"}')
    lines = [{"t": 1000.0 + t, "devices": [{"index": 0, "util_percent": u, "power_w": p, "temp_c": 50 + t},
                                           {"index": 1, "util_percent": 100, "power_w": 300.0, "temp_c": 70}]}
             for t, u, p in ((0, 50, 100.0), (1, 100, 200.0), (2, 90, 200.0))]
    (folder / "accelerator.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"t": 10')
    node, warnings = monitoring.summarize_node(folder, window=(999.5, 1002.5))  # the measured steps: all three
    assert warnings == []
    first, second = node["devices"]
    assert first["energy_j"] == pytest.approx(150 + 200) and second["energy_j"] == pytest.approx(600)
    assert first["util_percent"] == {"mean": 80, "max": 100} and first["temp_c"]["max"] == 52
    assert first["power_series"] == [[0.0, 100.0], [1.0, 200.0], [2.0, 200.0]]
    rnd = monitoring.summarize_round([node], tokens_per_s_total=10_000)
    assert rnd["energy_j"] == pytest.approx(950)
    assert rnd["power_w_mean"] == pytest.approx(500 / 3 + 300)
    assert rnd["tokens_per_joule"] == pytest.approx(10_000 / (500 / 3 + 300))
    assert rnd["accel_util_mean"] == pytest.approx((80 + 100) / 2)


def test_utilisation_and_power_are_read_over_the_measured_steps_not_start_up(tmp_path):
    """Ten samples: start-up and compilation idle at 5 % and 100 W (t = 0..4), the measured steps busy at
    95 % and 600 W (t = 5..9): the figures are the steps', the plotted series the whole round's; with no
    sample inside the steps (shorter than the interval) the whole round is used, and the summary says which."""
    folder = tmp_path / "monitor"
    folder.mkdir()
    (folder / "status.json").write_text('{"interval_s": 1, "host": "ok (host)", "accelerator": "ok (nvml)"}')
    busy = [(t, 5, 100.0) if t < 5 else (t, 95, 600.0) for t in range(10)]
    (folder / "accelerator.jsonl").write_text("".join(json.dumps(
        {"t": 1000.0 + t, "devices": [{"index": 0, "util_percent": u, "power_w": p}]}) + "\n" for t, u, p in busy))
    (folder / "host.jsonl").write_text("".join(json.dumps({"t": 1000.0 + t, "cpu_percent": u}) + "\n"
                                               for t, u, _ in busy))
    node, _ = monitoring.summarize_node(folder, window=(1004.6, 1009.2))
    (device,) = node["devices"]
    assert device["util_percent"] == {"mean": 95, "max": 95} and device["power_w"]["mean"] == 600
    assert device["energy_j"] == pytest.approx(4 * 600) and node["host"]["cpu_percent"]["mean"] == 95
    assert len(device["power_series"]) == 10 and node["window"]["accelerator"] == "measured steps"
    rnd = monitoring.summarize_round([node], tokens_per_s_total=6_000)
    assert rnd["window"] == "measured steps" and rnd["tokens_per_joule"] == pytest.approx(10)
    whole, _ = monitoring.summarize_node(folder, window=(1003.2, 1003.7))
    assert whole["devices"][0]["util_percent"]["mean"] == 50 and whole["window"]["accelerator"] == "whole round"
    mixed = monitoring.summarize_round([whole, node], 6_000)
    assert mixed["window"] == "whole round" and mixed["tokens_per_joule"] is None  # the steps' tokens, not start-up's power


def test_the_measured_window_spans_every_measured_step_record_one_by_one_or_at_once():
    from run_benchmarks.results.worker_logs.rank_logs import StepSeries

    records = [{"step": s, "warmup": s < 2, "step_time_s": 0.5, "tokens": 8.0, "loss": 1.0,
                "ended_at": 100.0 + s} for s in range(5)]
    at_once, one_by_one = StepSeries(), StepSeries()
    at_once.extend(records)
    for r in records:
        one_by_one.add(**r)
    assert at_once.window == one_by_one.window == (101.5, 104.0)  # step 2 began at 102 - 0.5; warm-up left out
    old = StepSeries()
    old.extend([{k: v for k, v in r.items() if k != "ended_at"} for r in records])  # workers before the field
    assert old.window is None


def test_monitor_figures_join_the_stored_results(golden_local, golden_two_nodes):
    """Real runs: a local one with the cpu monitor (golden_local), and two hosts whose vendor names a monitor
    this machine lacks (golden_two_nodes' root)."""
    doc = golden_local.doc("opt_tiny:torch:cpu:1:1")
    (node,) = doc["monitor"]["nodes"]
    assert node["status"]["accelerator"] == "ok (cpu)" and node["devices"][0]["util_percent"]["max"] > 0
    (row,) = [r for r in golden_local.attempts() if r["results_path"] == doc["results_path"]]
    assert row["accel_util_mean"] == doc["monitor"]["accel_util_mean"] > 0
    # the workers' step records carry the wall clock, so the measured steps' window reaches the monitor
    assert node["window"]["start"] < node["window"]["end"] and doc["monitor"]["window"] in ("measured steps",
                                                                                              "whole round")
    for doc in golden_two_nodes.docs():
        assert doc["status"] == "ok"
        assert any("accelerator monitor unavailable (rocm-smi)" in w for w in doc["warnings"]), doc["warnings"]


def test_host_cpu_busy_stays_within_0_and_100_when_iowait_goes_backwards():
    """The kernel's iowait may decrease between two readings (proc(5)); float sums round."""
    from collections import namedtuple

    from training.monitor.host import CpuBusy

    Times = namedtuple("Times", "user system idle iowait")
    readings = iter([Times(721.54, 228.76, 945.27, 901.43), Times(721.54, 228.76, 945.42, 901.43),  # idle only:
                     Times(722.54, 228.76, 945.42, 901.0), Times(722.54, 228.76, 945.42, 901.0)])  # rounds below 0

    class FakePsutil:
        @staticmethod
        def cpu_times():
            return next(readings)

    busy = CpuBusy(FakePsutil)
    assert [busy.percent() for _ in range(3)] == [0.0, 100.0, 0.0]  # iowait fell: busy at most 100; no time: 0

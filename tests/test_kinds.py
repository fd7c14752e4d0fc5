"""Accelerator kinds: the shipped ones, a kind a vendor declares in YAML alone, device counting and command
monitors, and the errors a vendor meets on the way (each names the file, the key and the fix)."""
from __future__ import annotations

import shutil

import pytest

from run_benchmarks.errors import UserError
from run_benchmarks.catalog.kinds import KINDS, DeviceCountSpec
from run_benchmarks.catalog.vendors import VendorRegistry
from training.monitor import Unavailable, command
from training.contract.spec import CommandMonitorSpec

from .conftest import ROOT, write

TESTKIND = ROOT / "tests" / "vendors" / "testkind"

NVIDIA_SMI_L = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c1e)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77aa)
"""
ROCM_SMI_SHOWID = """============================ ROCm System Management Interface ============================
=========================================== ID ===========================================
GPU[0]		: Device Name: 		Aqua Vanjaram [Instinct MI300X]
GPU[0]		: Device ID: 		0x74a1
GPU[1]		: Device Name: 		Aqua Vanjaram [Instinct MI300X]
GPU[1]		: Device ID: 		0x74a1
==========================================================================================
"""
AMD_SMI_LIST = """GPU: 0
    BDF: 0000:0c:00.0
    UUID: 6fff74a1-0000-1000-80b4-ad0c79a5eb3a

GPU: 1
    BDF: 0000:22:00.0
    UUID: 09ff74a1-0000-1000-8001-b7ed4e3ab0c9
"""
NPU_SMI_INFO_L = """Total Count                    : 8

NPU ID                         : 0
"""
# npu-smi info's table: one block of two lines per NPU (name, health, power W, temperature C; HBM used/total MB).
NPU_SMI_INFO = """+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.0                   Version: 23.0.0                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.1        41                0    / 0             |
| 0                         | 0000:C1:00.0  | 35          0    / 0          3404 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 90.4        40                0    / 0             |
| 0                         | 0000:01:00.0  | 0           0    / 0          3186 / 65536         |
+===========================+===============+====================================================+
"""


def test_shipped_kinds_say_how_each_device_is_reached():
    assert list(KINDS) == ["cpu", "nvidia", "rocm"]
    nvidia, rocm, cpu = KINDS.get("nvidia"), KINDS.get("rocm"), KINDS.get("cpu")
    assert (nvidia.torch_device, nvidia.paddle_device, nvidia.visible_devices_env) == ("cuda", "gpu", "CUDA_VISIBLE_DEVICES")
    assert (rocm.torch_device, rocm.visible_devices_env, rocm.monitor) == ("cuda", "HIP_VISIBLE_DEVICES", "rocm-smi")
    assert cpu.backends == {"torch": "gloo", "paddle": "gloo"} and not cpu.counted
    hardware = VendorRegistry(ROOT / "vendors").hardware
    assert hardware["MI300X"].kind is rocm and hardware["H100"].kind is nvidia
    device = hardware["MI300X"].device_spec("torch")
    assert (device.kind, device.torch_device, device.backend, device.monitor) == ("rocm", "cuda", "nccl", "rocm-smi")


def test_device_counts_read_each_tool_the_way_it_lists_devices():
    nvidia_smi, = KINDS.get("nvidia").device_count
    amd_smi, rocm_smi = KINDS.get("rocm").device_count
    assert nvidia_smi.count(NVIDIA_SMI_L) == 2
    assert rocm_smi.count(ROCM_SMI_SHOWID) == 2  # two lines per GPU, counted once each
    assert amd_smi.count(AMD_SMI_LIST) == 2
    assert DeviceCountSpec(command=("npu-smi", "info", "-l"), pattern=r"Total Count\s*:\s*(?P<count>\d+)").count(
        NPU_SMI_INFO_L) == 8
    assert amd_smi.count("") == 0


def test_a_command_monitor_parses_csv_and_table_output_without_code():
    csv_spec = CommandMonitorSpec(command=("nvidia-smi", "--query-gpu=index,name,utilization.gpu,memory.used,"
                                           "power.draw", "--format=csv,noheader,nounits"), format="csv",
                                  columns=("index", "name", "util_percent", "mem_used_bytes", "power_w"),
                                  scale={"mem_used_bytes": 2**20})
    first, second = command.parse(csv_spec, "0, NVIDIA H100, 97, 61234, 642.17\n1, NVIDIA H100, 0, 4, [N/A]\n")["devices"]
    assert first == {"index": 0, "name": "NVIDIA H100", "util_percent": 97.0, "mem_used_bytes": 61234 * 2**20,
                     "power_w": 642.17}
    assert second["power_w"] is None and second["mem_used_bytes"] == 4 * 2**20
    npu = CommandMonitorSpec(command=("npu-smi", "info"), format="regex", pattern=(
        r"^\| (?P<index>\d+)\s+(?P<name>\S+)\s+\| OK\s+\| (?P<power_w>[\d.]+)\s+(?P<temp_c>\d+).*\n"
        r"^\| \d+\s+\| \S+\s+\| (?P<util_percent>\d+)\s+\d+\s*/\s*\d+\s+(?P<mem_used_bytes>\d+)\s*/\s*(?P<mem_total_bytes>\d+)"),
        scale={"mem_used_bytes": 2**20, "mem_total_bytes": 2**20})
    devices = command.parse(npu, NPU_SMI_INFO)["devices"]
    assert [d["index"] for d in devices] == [0, 1] and devices[0]["name"] == "910B3"
    assert devices[0]["power_w"] == 93.1 and devices[0]["temp_c"] == 41 and devices[0]["util_percent"] == 35
    assert devices[1]["mem_used_bytes"] == 3186 * 2**20 and devices[1]["mem_total_bytes"] == 65536 * 2**20
    with pytest.raises(Unavailable, match="printed no device reading"):
        command.parse(csv_spec, "NVIDIA-SMI has failed because it couldn't communicate with the driver\n")


def test_a_command_monitor_with_an_unknown_field_is_refused():
    with pytest.raises(ValueError, match="unknown device field"):
        CommandMonitorSpec(command=("x",), format="csv", columns=("index", "watts"))


def _vendor_root(root, text: str):
    shutil.rmtree(root / "vendors" / "template")
    write(root / "vendors" / "acme" / "vendor.yaml", text)
    return root


ASCEND = """description: Ascend NPUs through torch_npu and Paddle's custom device
kinds:
  ascend:
    torch_device: npu
    torch_module: torch_npu
    paddle_device: npu
    visible_devices_env: ASCEND_RT_VISIBLE_DEVICES
    device_count:
      - command: [npu-smi, info, -l]
        pattern: 'Total Count\\s*:\\s*(?P<count>\\d+)'
    backends: {torch: hccl, paddle: hccl}
    monitor:
      command: [npu-smi, info]
      format: regex
      pattern: '^\\| (?P<index>\\d+)\\s+(?P<name>\\S+)\\s+\\| OK\\s+\\| (?P<power_w>[\\d.]+)\\s+(?P<temp_c>\\d+)'
accelerators:
  910B:
    kind: ascend
    memory_gib: 64
    dies_per_device: 1
    peak_tflops: {fp32: 94, fp16: 313, bf16: 313}
    unsupported_dtypes: [tf32, fp8]
frameworks:
  torch: {env: {}}
  paddle: {env: {}}
"""


def test_a_kind_declared_in_a_vendor_yaml_reaches_the_worker_config(accelbench, root):
    _vendor_root(root, ASCEND)
    listed = accelbench("list", "--root", str(root))
    assert listed.returncode == 0, listed.stderr
    assert "ascend" in listed.stdout and "ASCEND_RT_VISIBLE_DEVICES" in listed.stdout
    (root / "training").symlink_to(ROOT / "training")
    dry = accelbench("run", "gpt2_tiny:torch:910B:1:8", "--root", str(root), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    registry = VendorRegistry(root / "vendors")
    device = registry.hardware["910B"].device_spec("torch")
    assert (device.torch_device, device.torch_module, device.backend) == ("npu", "torch_npu", "hccl")
    assert device.monitor.command == ("npu-smi", "info")
    assert "kind ascend" in dry.stdout


def test_the_old_device_key_and_an_unknown_kind_get_the_fix(accelbench, root):
    _vendor_root(root, ASCEND.replace("    kind: ascend\n", "    device: npu\n"))
    listed = accelbench("list", "--root", str(root))  # the fields it shows, named; --check gives the fix
    assert listed.returncode == 2 and "vendors/acme/vendor.yaml: accelerators.910B: no 'kind'" in listed.stdout
    assert "accelbench list --check" in listed.stdout
    done = accelbench("list", "--check", "--root", str(root))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "vendors/acme/vendor.yaml: accelerators.910B: 'device' is now 'kind'" in done.stderr
    write(root / "vendors/acme/vendor.yaml", ASCEND.replace("    kind: ascend\n", "    kind: npu\n"))
    listed = accelbench("list", "--root", str(root))
    assert listed.returncode == 2 and "accelerators.910B.kind: unknown accelerator kind 'npu'" in listed.stdout
    done = accelbench("list", "--check", "--root", str(root))
    assert done.returncode == 2
    assert "accelerators.910B.kind: unknown accelerator kind 'npu'" in done.stderr
    assert "declare it under kinds:" in done.stderr


def test_vendor_check_matches_config_names_exactly_and_to_declared_frameworks(accelbench, root):
    folder = root / "vendors" / "acme"
    _vendor_root(root, ASCEND.replace("  910B:", "  X1:").replace("frameworks:\n  torch: {env: {}}\n  paddle: {env: {}}\n",
                                                                  "frameworks:\n  torch: {env: {}}\n"))
    write(folder / "docker/torch_2.13/Dockerfile", "FROM scratch\n")
    config = "train: {micro_batch_size: 1}\nparallel: {sharding: stage1}\n"
    for name in ("config_TP1PP1SH1SP2X1x1x2", "config_TP1PP1SH1SP2H100x1x2", "config_fastx1x2"):
        write(folder / f"gpt3_tiny/torch/{name}.yaml", config)
    write(folder / "gpt3_tiny/paddle/config_TP1PP1SH1SP2X1x1x2.yaml", config)
    done = accelbench("vendor", "check", "acme", "--root", str(root))
    assert done.returncode == 1
    out = done.stdout
    findings = {name: f"{name}.yaml" in out for name in ("config_TP1PP1SH1SP2H100x1x2", "config_fastx1x2",
                                                          "config_TP1PP1SH1SP2X1x1x2")}
    assert findings == {"config_TP1PP1SH1SP2H100x1x2": True, "config_fastx1x2": True,
                        "config_TP1PP1SH1SP2X1x1x2": True}  # the last only for its paddle copy
    assert out.count("does not end in <accelerator>x<nnodes>x<nprocs> with one of this vendor's accelerators: X1") == 2
    assert "framework 'paddle' is not declared" in out
    torch_ok = folder / "gpt3_tiny/torch/config_TP1PP1SH1SP2X1x1x2.yaml"
    assert f"{torch_ok}\n" not in out  # the well-named torch config has no finding


def test_a_missing_cluster_file_says_what_to_write(accelbench):
    done = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--cluster", "hosts.yaml")
    assert done.returncode == 2
    assert "--cluster hosts.yaml: file not found" in done.stderr and "hosts:" in done.stderr
    assert "Hosts over SSH" in done.stderr


def test_the_tree_is_found_from_the_current_directory_first(accelbench, root, tmp_path):
    inner = root / "vendors" / "cpu"
    done = accelbench("vendor", "new", "acme", cwd=inner)
    assert done.returncode == 0, done.stderr
    assert (root / "vendors" / "acme" / "vendor.yaml").is_file()  # the copy, not the installed checkout
    assert not (ROOT / "vendors" / "acme").exists()


def test_the_test_kind_lives_only_in_its_vendor_folder():
    """What the end-to-end kind tests rely on: nothing outside tests/vendors/testkind names it."""
    import subprocess

    found = subprocess.run(["grep", "-rl", "testkind", "run_benchmarks", "training", "vendors"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()
    assert found == []
    assert {p.name for p in TESTKIND.iterdir() if p.is_file()} >= {"vendor.yaml", "smi.py", "plugin.py"}

"""``accelbench vendor import-flagperf FOLDER``: a FlagPerf vendor folder's .py configs become accelbench YAML that
plans exactly what the shipped YAML plans, with the source and each key's line as comments; a config that
cannot be read is refused (nothing in it runs) and the others are still converted."""
from __future__ import annotations

import hashlib

import yaml

from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs

from .conftest import ROOT, write
from .test_flagperf_config import as_flagperf

CONFIGS = ("config_TP1PP1SH2SP8A10080Gx1x8", "config_TP2PP4SH1SP1A10040Gx1x8")


def workload(root, extern: str, hardware: str, tmp_path):
    plan = build_run_plan(load_inputs(root), [f"gpt3_6.7B:paddle:{hardware}:1:8"], "import", tmp_path / "logs",
                          extern)
    return plan.cases[0].workload


def test_a_flagperf_folder_becomes_yaml_that_plans_what_the_shipped_yaml_plans(accelbench, root, tmp_path):
    shipped = root / "vendors/nvidia/gpt3_6.7B/paddle"
    flagperf = tmp_path / "FlagPerf/training/nvidia"
    for name in CONFIGS:
        write(flagperf / f"gpt3_6.7B-paddle/config/{name}.py", as_flagperf(yaml.safe_load((shipped / f"{name}.yaml")
                                                                                          .read_text())))
        (shipped / f"{name}.yaml").unlink()
    canary = tmp_path / "CANARY"
    write(flagperf / "gpt3_6.7B-paddle/config/config_evilA100x1x8.py", f'seed = open("{canary}", "w")\n')
    write(flagperf / "no_such_case-paddle/config/config_A100x1x8.py", "seed = 1\n")
    done = accelbench("vendor", "import-flagperf", str(flagperf), "--root", str(root))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 FlagPerf config(s): 2 written, 0 kept, 2 refused" in done.stdout
    assert "config_evilA100x1x8.py: " in done.stdout and ":1: refused: a call of 'open'" in done.stdout
    assert "folder 'no_such_case-paddle' is not <case>-<framework>" in done.stdout
    assert not canary.exists()
    for name in CONFIGS:
        converted = shipped / f"{name}.yaml"
        hardware = "A100" if "A10080G" in name else "A100_40G"
        assert workload(root, name, hardware, tmp_path) == workload(ROOT, name, hardware, tmp_path)
        text = converted.read_text()
        source = flagperf / f"gpt3_6.7B-paddle/config/{name}.py"
        assert f"# Converted from FlagPerf's nvidia/gpt3_6.7B-paddle/config/{name}.py (sha256 " \
               f"{hashlib.sha256(source.read_bytes()).hexdigest()})" in text
        lines = source.read_text().splitlines()
        line = next(i for i, text in enumerate(lines, 1) if text.startswith("per_device_train_batch_size"))
        batch = yaml.safe_load(text)["train"]["micro_batch_size"]
        assert f"micro_batch_size: {batch}  # per_device_train_batch_size = {batch} (line {line})" in text
        assert "#   max_steps = 100 (line 8): the case's step count" in text
        assert "#   save_steps = 10000 (line 9): accelbench saves no checkpoints" in text

    again = accelbench("vendor", "import-flagperf", str(flagperf), "--root", str(root))
    assert "0 written, 2 kept, 2 refused" in again.stdout
    forced = accelbench("vendor", "import-flagperf", str(flagperf), "--root", str(root), "--force")
    assert "2 written, 0 kept, 2 refused" in forced.stdout


def test_values_cannot_break_out_of_their_comment_line(accelbench, root, tmp_path):
    flagperf = tmp_path / "nvidia"
    write(flagperf / "gpt3_6.7B-paddle/config/config_odd.py",
          'output_dir = "x\\nmodel: {n_layer: 1}\\u2028train: {steps: 1}"\nper_device_train_batch_size = 2\n')
    done = accelbench("vendor", "import-flagperf", str(flagperf), "--root", str(root))
    assert done.returncode == 0, done.stdout
    converted = root / "vendors/nvidia/gpt3_6.7B/paddle/config_odd.yaml"
    assert yaml.safe_load(converted.read_text()) == {
        "description": "gpt3_6.7B: converted from FlagPerf config_odd.py", "train": {"micro_batch_size": 2}}


def test_an_unknown_vendor_or_a_folder_without_configs_is_refused(accelbench, root, tmp_path):
    write(tmp_path / "acme/gpt3_6.7B-paddle/config/config_x.py", "seed = 1\n")
    done = accelbench("vendor", "import-flagperf", str(tmp_path / "acme"), "--root", str(root))
    assert done.returncode == 2 and "vendor 'acme' has no" in done.stderr and "accelbench vendor new acme" in done.stderr
    (tmp_path / "empty").mkdir()
    done = accelbench("vendor", "import-flagperf", str(tmp_path / "empty"), "--root", str(root), "--vendor", "nvidia")
    assert done.returncode == 2 and "no config_*.py under it" in done.stderr


def test_vendor_check_plans_flagperf_py_configs_too(accelbench, root):
    folder = root / "vendors/nvidia/gpt3_6.7B/paddle"
    write(folder / "config_TP3A100x1x8.py", "tensor_parallel_degree = 3\nsave_steps = 100\n")
    done = accelbench("vendor", "check", "nvidia", "--root", str(root))
    assert done.returncode == 1 and str(folder / "config_TP3A100x1x8.py") in done.stdout, done.stdout
    assert "inconsistent parallel layout" in done.stdout
    (folder / "config_TP3A100x1x8.py").unlink()
    write(folder / "config_TP2A100x1x8.py", "tensor_parallel_degree = 2\nsave_steps = 100\n")
    assert accelbench("vendor", "check", "nvidia", "--root", str(root)).returncode == 0

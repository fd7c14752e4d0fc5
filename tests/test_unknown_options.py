"""Options people bring from FlagPerf: ``--extern_config_dir`` is taken (the folder the extern config is found
in), ``--nproc_per_node`` is refused naming FlagPerf's ``--nproc``, and any option no parser knows is refused
with the nearest one it does (exit 2), for start_task.py and every accelbench command alike."""
from __future__ import annotations

import pytest
import yaml

from .conftest import ROOT, write
from .test_flagperf_config import as_flagperf
from .test_flagperf_options import plans, start_task  # noqa: F401 - fixtures

SHIPPED = ROOT / "vendors/nvidia/gpt3_6.7B/paddle/config_TP1PP1SH2SP8A10080Gx1x8.yaml"


def test_extern_config_dir_is_where_the_named_config_is_read_from(start_task, plans, tmp_path):  # noqa: F811
    folder = write(tmp_path / "FlagPerf/training/nvidia/gpt3_6.7B-paddle/config/config_TP1PP1SH2SP8A10080Gx1x8.py",
                   as_flagperf(yaml.safe_load(SHIPPED.read_text()))).parent
    done = start_task("--extern_config_dir", str(folder))
    assert done.returncode == 0, done.stderr
    (case,) = plans[0].cases
    assert case.extern_config == folder / "config_TP1PP1SH2SP8A10080Gx1x8.py"
    assert (case.workload.parallel.sharding, case.workload.parallel.sharding_parallel_degree) == ("stage2", 8)
    assert f"--extern_config_dir {folder}: the extern config is {folder}/config_TP1PP1SH2SP8A10080Gx1x8.py" \
        in done.stdout


@pytest.mark.parametrize("changes, extra, message", [
    ({}, ("--extern_config_dir", "/home/FlagPerf/training/nvidia/gpt3_6.7B-paddle/config"),
     "/home/FlagPerf/training/nvidia/gpt3_6.7B-paddle/config is not a folder on this machine"),
    ({"--extern_config_file": False, "--enable_extern_config": False}, ("--extern_config_dir", "."),
     "no --extern_config_file was given"),
    ({}, ("--extern_config_dir", "."), "extern config 'config_TP1PP1SH2SP8A10080Gx1x8.py' not found"),
])
def test_extern_config_dir_that_cannot_be_read_is_refused(start_task, plans, changes, extra, message):  # noqa: F811
    done = start_task(*extra, **changes)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not plans


@pytest.mark.parametrize("argv, entry, message, fix", [
    (("--case_name", "gpt2_tiny:torch:cpu:1:2", "--nproc_per_node", "2"), "start_task",
     "unrecognized option --nproc_per_node", "FlagPerf's option is --nproc"),
    (("--case_name", "gpt2_tiny:torch:cpu:1:2", "--nproc_per_node=2"), "start_task",
     "unrecognized option --nproc_per_node", "FlagPerf's option is --nproc"),
    (("--case_name", "gpt2_tiny:torch:cpu:1:2", "--data-dir", "x"), "start_task",
     "unrecognized option --data-dir", "did you mean --data_dir?"),
    (("--case_name", "gpt2_tiny:torch:cpu:1:2", "--extern-config-dir", "x"), "start_task",
     "unrecognized option --extern-config-dir", "did you mean --extern_config_dir?"),
    (("report", "--formt", "markdown"), "accelbench", "unrecognized option --formt", "did you mean --format?"),
    (("vendor", "check", "cpu", "--run_tools"), "accelbench", "unrecognized option --run_tools",
     "did you mean --run-tools?"),
    (("run", "gpt2_tiny:torch:cpu:1:2", "--zzz"), "accelbench", "unrecognized option --zzz",
     "see `accelbench run --help` for the options"),
])
def test_an_unknown_option_is_refused_with_the_nearest_known_one(accelbench, argv, entry, message, fix):
    done = accelbench(*argv, "--dry-run", entry=entry) if entry == "start_task" else accelbench(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"accelbench: error: {message}\n" in done.stderr and f"fix: {fix}" in done.stderr, done.stderr
    assert "unrecognized arguments" not in done.stderr and "usage:" not in done.stderr

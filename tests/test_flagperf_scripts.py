"""FlagPerf's own paths: ``training/run_benchmarks/paddle/start_paddle_task.py`` (and ``pytorch/``) run from
FlagPerf's folder with its guide's command, ``run.py`` with FlagPerf's ``config/test_conf.py`` and
``cluster_conf.py`` read without running them; and that folder stays a folder of scripts, outside the worker
package. The scripts themselves run as processes once (what is under test there is the process: its sys.path
and the folder it stands in); everything else calls their ``main`` in this process, with ``--dry-run``."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
import setuptools

from run_benchmarks.cli import flagperf_run

from .conftest import ROOT, write
from .test_flagperf_options import ISSUE, plans  # noqa: F401 - fixture

SCRIPTS = ROOT / "training/run_benchmarks"
DATA = ("gpt_en_dataset_300m_ids.npy", "gpt_en_dataset_300m_idx.npz")


def test_the_published_command_from_flagperfs_folder_plans_sharding_stage2_over_8_devices(tmp_path):
    """Verbatim from training/run_benchmarks/ (a copy of the folder whose script links to this checkout's), with
    FlagPerf's data folder beside it: ./GPT-3-data and ./log_dir resolve against the folder the user is in."""
    folder = tmp_path / "training/run_benchmarks"
    (folder / "paddle").mkdir(parents=True)
    (folder / "paddle/start_paddle_task.py").symlink_to(SCRIPTS / "paddle/start_paddle_task.py")
    for name in DATA:
        write(folder / "GPT-3-data" / name, "")
    argv = [w for key, value in ISSUE.items() for w in ((key,) if value is None else (key, value))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script finds its own checkout
    done = subprocess.run([sys.executable, "paddle/start_paddle_task.py", *argv, "--dry-run"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "layout: data 8 (sharding stage2 over 8) x tensor 1 x pipeline 1 = 8 ranks" in done.stdout
    assert f"data.path {folder / 'GPT-3-data/gpt_en_dataset_300m'}" in done.stdout
    assert f"-> {folder / 'log_dir/results'}/" in done.stdout.splitlines()[0]
    assert f"case file: {ROOT / 'cases/gpt3_6.7B/case.yaml'}" in done.stdout


def test_the_shipped_run_py_config_plans_from_training(tmp_path):
    """``python3 run_benchmarks/run.py --dry-run`` from training/, as FlagPerf's README says, with the shipped
    config/ files: this machine's default case."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "run_benchmarks/run.py", "--dry-run", "--log-root", str(tmp_path)],
                          cwd=ROOT / "training", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpt2_tiny:torch_2.13:cpu:1:2  vendor cpu" in done.stdout
    assert "FlagPerf's config files, as this run takes them:" in done.stdout
    assert "PIP_SOURCE" in done.stdout and "ignored: the image is built from the vendor's Dockerfile" in done.stdout


def test_the_paddle_script_starts_paddle_cases_only(accelbench):
    import start_task

    paddle = functools.partial(start_task.main, framework="paddle")
    done = accelbench("--case_name", "gpt2_tiny:torch_2.13:cpu:1:2", "--dry-run", entry=paddle)
    assert done.returncode == 2
    assert ("paddle/start_paddle_task.py starts paddle cases, and gpt2_tiny:torch_2.13:cpu:1:2 is a torch case"
            in done.stderr and "run it with pytorch/start_pytorch_task.py" in done.stderr)
    done = accelbench("--dry-run", entry=paddle)
    assert done.returncode == 2 and "starts the case --case_name names, and none was given" in done.stderr
    torch = functools.partial(start_task.main, framework="torch")
    assert accelbench("--case_name", "gpt2_tiny:torch_2.13:cpu:1:2", "--dry-run", entry=torch).returncode == 0


# ---------------------------------------------------------------- run.py with FlagPerf's two files

TEST_CONF = '''\'\'\'Test Configs, including\'\'\'
# -*-coding:utf-8 -*-
VENDOR = "nvidia"
ACCE_CONTAINER_OPT = " --gpus all"
ACCE_VISIBLE_DEVICE_ENV_NAME = "CUDA_VISIBLE_DEVICES"
PIP_SOURCE = "https://mirror.baidu.com/pypi/simple"
FLAGPERF_PATH = "./flagperf"
FLAGPERF_LOG_PATH = FLAGPERF_PATH + "/result/"
FLAGPERF_LOG_LEVEL = 'debug'
SHM_SIZE = "32G"
CLEAR_CACHES = True
CASES = {
    # nvidia cases
    "gpt3_6.7B:paddle_2.5.1:A100:1:8:1": "./GPT-3-data",
    "gpt3_13B:paddle_2.5.1:A100:2:8:1": "GPT-3-data/",
}
'''
CLUSTER_CONF = '''\'\'\'Cluster configs\'\'\'
HOSTS = ["10.1.2.2", "10.1.2.3"]
HOSTS_PORTS = ["2222"]
MASTER_PORT = "29501"
SSH_PORT = "2200"
'''


@pytest.fixture
def flagperf(tmp_path):
    """FlagPerf's training/run_benchmarks/ with its two files and GPT-3 data; ``run(*args, test=..., cluster=...)``
    calls run.py's main in this process from another folder (paths in the files resolve against theirs)."""
    folder = tmp_path / "FlagPerf/training/run_benchmarks"
    for name in DATA:
        write(folder / "GPT-3-data" / name, "")

    def run(accelbench, *args, test: str = TEST_CONF, cluster: str = CLUSTER_CONF):
        write(folder / "config/test_conf.py", test)
        write(folder / "config/cluster_conf.py", cluster)
        return accelbench(*args, entry=lambda argv: flagperf_run.main(argv, folder), cwd=tmp_path)

    run.folder = folder
    return run


def test_run_py_plans_every_case_of_cases_with_its_data_on_cluster_confs_hosts(accelbench, flagperf, plans):
    done = flagperf(accelbench, "--dry-run")
    assert done.returncode == 0, done.stderr
    (plan,) = plans
    folder = flagperf.folder
    assert [str(c.name) for c in plan.cases] == ["gpt3_6.7B:paddle_2.5.1:A100:1:8", "gpt3_13B:paddle_2.5.1:A100:2:8"]
    for case in plan.cases:
        assert (case.workload.data.source, case.workload.data.path) == (
            "tokens", str(folder / "GPT-3-data/gpt_en_dataset_300m"))
    assert [(h.address, h.port, h.backend) for h in plan.cluster.hosts] == [("10.1.2.2", 2200, "ssh"),
                                                                             ("10.1.2.3", 2200, "ssh")]
    assert plan.cluster.master_port == 29501
    assert [n.host.address for n in plan.cases[1].rounds[0].nodes] == ["10.1.2.2", "10.1.2.3"]
    assert plan.dir.parent == folder / "flagperf/result"  # FLAGPERF_PATH + "/result/", against run_benchmarks/
    for said in ("FlagPerf's config files, as this run takes them:", "agrees with the case name's hardware",
                 "HOSTS 10.1.2.2: node 0 over SSH on port 2200", "PIP_SOURCE", "HOSTS_PORTS",
                 "CLEAR_CACHES", "FLAGPERF_LOG_LEVEL = 'debug': accepted"):
        assert said in done.stdout, said


def test_flagperfs_newer_case_names_with_the_config_in_the_hardware_field_run_that_config(accelbench, flagperf,
                                                                                           plans):
    test = TEST_CONF.replace('"gpt3_13B:paddle_2.5.1:A100:2:8:1"', '"gpt3_13B:paddle_2.5.1:TP1PP1SH2SP8A10040G:1:8:1"')
    done = flagperf(accelbench, "--dry-run", test=test)
    assert done.returncode == 0, done.stderr
    case = plans[0].cases[1]
    assert (str(case.name), case.hardware.name) == ("gpt3_13B:paddle_2.5.1:A100_40G:1:8", "A100_40G")
    assert case.extern_config == ROOT / "vendors/nvidia/gpt3_13B/paddle/config_TP1PP1SH2SP8A10040Gx1x8.yaml"
    assert (case.workload.parallel.sharding, case.workload.parallel.sharding_parallel_degree) == ("stage2", 8)
    assert "the hardware field TP1PP1SH2SP8A10040G names nvidia's extern config" in done.stdout
    unknown = flagperf(accelbench, "--dry-run", test=test.replace("TP1PP1SH2SP8A10040G", "TP9PP9X1"))
    assert unknown.returncode == 2 and "unknown hardware 'TP9PP9X1'" in unknown.stderr


def test_run_py_command_line_wins_log_root_and_cluster(accelbench, flagperf, plans, tmp_path):
    write(tmp_path / "hosts.yaml", "hosts:\n  - {name: a}\n  - {name: b}\n")
    done = flagperf(accelbench, "--dry-run", "--log-root", str(tmp_path / "mine"), "--cluster",
                    str(tmp_path / "hosts.yaml"))
    assert done.returncode == 0, done.stderr
    assert plans[0].dir.parent == tmp_path / "mine" and [h.name for h in plans[0].cluster.hosts] == ["a", "b"]
    assert "cluster_conf.py: not read; the hosts are --cluster" in done.stdout


@pytest.mark.parametrize("test, cluster, message", [
    (TEST_CONF + "import os\n", CLUSTER_CONF, "test_conf.py:17: refused: an import"),
    (TEST_CONF.replace('"./flagperf"', 'os.getcwd()'), CLUSTER_CONF, "test_conf.py:7: refused: a call of 'os.getcwd'"),
    (TEST_CONF + "X = open('/etc/passwd').read()\n", CLUSTER_CONF, "test_conf.py:17: refused: a call of"),
    (TEST_CONF.replace("FLAGPERF_PATH + ", "HOME + "), CLUSTER_CONF,
     "test_conf.py:8: refused: the name 'HOME' is not a key assigned above in this file"),
    (TEST_CONF.replace("VENDOR =", "VENDR ="), CLUSTER_CONF, "unknown key 'VENDR'"),
    (TEST_CONF + "HOSTS = ['a']\n", CLUSTER_CONF, "unknown key 'HOSTS' (it belongs in cluster_conf.py)"),
    (TEST_CONF.replace('"./GPT-3-data"', "42"), CLUSTER_CONF, "expected the data folder as a string"),
    (TEST_CONF.replace("'debug'", "'loud'"), CLUSTER_CONF, "FLAGPERF_LOG_LEVEL = 'loud': not a log level"),
    (TEST_CONF.replace('"nvidia"', '"amd"'), CLUSTER_CONF, "VENDOR = 'amd' (" ),
    (TEST_CONF, CLUSTER_CONF.replace('"2200"', '"ssh"'), "SSH_PORT = 'ssh': not a port"),
    (TEST_CONF, "SSH_PORT = 22\n", "cluster_conf.py: HOSTS is not set"),
    (TEST_CONF, CLUSTER_CONF.replace('"10.1.2.3"', '"10.1.2.3;reboot"'), "expected host names or addresses"),
    (TEST_CONF.replace('"./GPT-3-data"', '"./nowhere"'), CLUSTER_CONF, "is not a folder on this machine"),
])
def test_run_py_refuses_what_it_cannot_take_and_nothing_runs(accelbench, flagperf, plans, test, cluster, message):
    done = flagperf(accelbench, "--dry-run", test=test, cluster=cluster)
    assert done.returncode == 2 and message in done.stderr, done.stdout + done.stderr
    assert not plans and "Traceback" not in done.stderr
    assert not (flagperf.folder / "flagperf").exists()  # nothing made, not even the log root


def test_a_test_conf_that_calls_a_function_is_refused_before_anything_runs(accelbench, flagperf, tmp_path):
    """Without --dry-run too: the file is read, not run, so the call never happens."""
    marker = tmp_path / "ran"
    test = TEST_CONF + f"__import__('pathlib').Path({str(marker)!r}).touch()\n"
    done = flagperf(accelbench, test=test)
    assert done.returncode == 2 and "test_conf.py:17: refused: a call of" in done.stderr
    assert not marker.exists() and not (flagperf.folder / "flagperf").exists()


# ---------------------------------------------------------------- a folder of scripts, not a package


def test_flagperfs_folder_is_scripts_outside_the_worker_package():
    assert not list(SCRIPTS.rglob("__init__.py"))
    found = setuptools.find_packages(str(ROOT), include=["run_benchmarks", "run_benchmarks.*", "training",
                                                         "training.*"])
    assert "training" in found and not [p for p in found if p.startswith("training.run_benchmarks")]
    import grimp

    graph = grimp.build_graph("training", cache_dir=None)
    assert not [m for m in graph.modules if m.startswith("training.run_benchmarks")]


def test_the_readme_tables_every_key_run_py_reads():
    from run_benchmarks.catalog.flagperf_conf import KEYS

    section = (ROOT / "README.md").read_text().split("### FlagPerf's run.py", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().split(" ")[0].strip("`") for line in section.splitlines()
            if line.startswith("| `")}
    assert rows == set(KEYS)

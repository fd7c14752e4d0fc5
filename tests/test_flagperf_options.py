"""FlagPerf's own start_task options: the command from FlagPerf's GPT-3 Paddle guide, pasted as it is, plans what
accelbench's own command plans (but for the data, log folder and hosts it names) and says what each option
became; each option's mapping, and each contradiction between two options that say the same fact (exit 2,
naming both)."""
from __future__ import annotations

import pytest
import yaml

from run_benchmarks.cli import run as cli_run

from .conftest import write

# The issue's command, option by option (FlagPerf's guide, with --dry-run added).
ISSUE = {"--vendor": "nvidia", "--case_name": "gpt3_6.7B:paddle_2.5.1:A100:1:8:1", "--model_name": "gpt3_6.7B",
         "--train_script": "run_pretraining.py", "--nnodes": "1", "--nproc": "8", "--hosts": "127.0.0.1",
         "--hosts_ports": "2222", "--data_dir": "./GPT-3-data", "--log_dir": "./log_dir/results",
         "--log_level": "debug", "--extern_config_file": "config_TP1PP1SH2SP8A10080Gx1x8.py",
         "--enable_extern_config": None, "--master_port": "29301", "--round": "1",
         "--visible_dev_env": "CUDA_VISIBLE_DEVICES", "--master_addr": "127.0.0.1", "--node_rank": "0",
         "--host_addr": "127.0.0.1"}


@pytest.fixture
def plans(monkeypatch):
    """Every plan a dry run prints, as the objects the CLI built."""
    seen = []
    printed = cli_run.print_plan

    def capture(console, plan):
        seen.append(plan)
        printed(console, plan)

    monkeypatch.setattr(cli_run, "print_plan", capture)
    return seen


@pytest.fixture
def start_task(accelbench, tmp_path):
    """start_task.py in this process, from ``tmp_path`` (which holds FlagPerf's GPT-3-data), its log root the
    one the issue's --log_dir names."""
    data = tmp_path / "GPT-3-data"
    for suffix in ("_ids.npy", "_idx.npz"):
        write(data / f"gpt_en_dataset_300m{suffix}", "")

    def run(*args, log_root=None, **changes):
        options = {**ISSUE, **changes}
        argv = [word for key, value in options.items() if value is not False
                for word in ((key,) if value is None else (key, value))]
        return accelbench(*argv, *args, "--dry-run", entry="start_task",
                          log_root=log_root or tmp_path / "log_dir/results")

    run.data = data
    return run


def test_the_issues_command_plans_what_accelbench_plans_but_its_data_logs_and_hosts(start_task, accelbench, plans,
                                                                                       tmp_path):
    base = accelbench("--case_name", "gpt3_6.7B:paddle_2.5.1:A100:1:8", "--extern_config_file",
                      "config_TP1PP1SH2SP8A10080Gx1x8", "--dry-run", entry="start_task")
    done = start_task()
    assert (base.returncode, done.returncode) == (0, 0), done.stderr
    (base_plan, flagperf_plan) = plans
    (base_case,), (case,) = base_plan.cases, flagperf_plan.cases
    dataset = str(tmp_path / "GPT-3-data/gpt_en_dataset_300m")
    assert case.workload.data.model_dump() == {**base_case.workload.data.model_dump(), "source": "tokens",
                                               "path": dataset}
    assert case.workload.model_copy(update={"data": base_case.workload.data}) == base_case.workload
    assert (case.name, case.extern_config, len(case.rounds)) == (base_case.name, base_case.extern_config, 1)
    assert [n.host for n in case.rounds[0].nodes] == [n.host for n in base_case.rounds[0].nodes]  # this machine
    assert flagperf_plan.cluster.master_port == 29301
    assert flagperf_plan.dir.parent == tmp_path / "log_dir/results"
    for said in ("'config_TP1PP1SH2SP8A10080Gx1x8.py' named a .py file; config_TP1PP1SH2SP8A10080Gx1x8.yaml is the "
                 "one there, and is read", "FlagPerf's options, as this run takes them:",
                 "--vendor nvidia: agrees with the case name's hardware", "--nnodes 1: agrees with the case name",
                 "--hosts 127.0.0.1: node 0 on this machine, as local processes (--hosts_ports 2222 is not used",
                 f"--data_dir ./GPT-3-data: data.source tokens, data.path {dataset}",
                 "--master_port 29301: the rendezvous port of every round",
                 "--visible_dev_env CUDA_VISIBLE_DEVICES: agrees", "--log_level debug: accepted",
                 "--enable_extern_config: implied", "--train_script run_pretraining.py: agrees",
                 "--node_rank 0: this command starts every node", "--host_addr 127.0.0.1: node 0's host",
                 "--round 1: agrees with the case name's repeat"):
        assert said in done.stdout, said


def test_with_flagperfs_own_py_config_it_plans_the_same(start_task, plans, root, tmp_path):
    """The vendor's folder holding FlagPerf's .py in place of the YAML: the same workload as the YAML's."""
    from .test_flagperf_config import as_flagperf

    folder = root / "vendors/nvidia/gpt3_6.7B/paddle"
    shipped = folder / "config_TP1PP1SH2SP8A10080Gx1x8.yaml"
    assert start_task("--root", str(root)).returncode == 0
    write(folder / "config_TP1PP1SH2SP8A10080Gx1x8.py", as_flagperf(yaml.safe_load(shipped.read_text())))
    shipped.unlink()
    done = start_task("--root", str(root))
    assert done.returncode == 0, done.stderr
    from_yaml, from_py = (p.cases[0] for p in plans)
    assert from_py.workload == from_yaml.workload
    assert from_py.extern_config == folder / "config_TP1PP1SH2SP8A10080Gx1x8.py"
    assert "read as a FlagPerf Python config, without running it" in done.stdout


@pytest.mark.parametrize("changes, said, other", [
    ({"--nnodes": "2"}, "--nnodes 2", "the case name gpt3_6.7B:paddle_2.5.1:A100:1:8:1's nnodes 1"),
    ({"--nproc": "4"}, "--nproc 4", "the case name gpt3_6.7B:paddle_2.5.1:A100:1:8:1's nprocs_per_node 8"),
    ({"--model_name": "gpt3_13B"}, "--model_name gpt3_13B", "'s case gpt3_6.7B"),
    ({"--round": "3"}, "--round 3", "the case name gpt3_6.7B:paddle_2.5.1:A100:1:8:1's repeat 1"),
    ({"--vendor": "amd"}, "--vendor amd", "hardware A100 of gpt3_6.7B:paddle_2.5.1:A100:1:8, which vendor nvidia "
                                          "declares"),
    ({"--visible_dev_env": "HIP_VISIBLE_DEVICES"}, "--visible_dev_env HIP_VISIBLE_DEVICES",
     "accelerator kind nvidia of hardware A100, whose variable is CUDA_VISIBLE_DEVICES"),
    ({"--train_script": "run_pretrain.py"}, "--train_script run_pretrain.py",
     "the worker accelbench runs for every case, training/run_pretraining.py"),
    ({"--master_addr": "10.0.0.5"}, "--master_addr 10.0.0.5", "node 0's host localhost at 127.0.0.1 (--hosts)"),
    ({"--host_addr": "10.0.0.5"}, "--host_addr 10.0.0.5", "node 0's host localhost at 127.0.0.1 (--hosts)"),
    ({"--hosts": False, "--hosts_ports": False, "--master_addr": "10.0.0.5"}, "--master_addr 10.0.0.5",
     "configs/cluster.yaml"),
])
def test_a_fact_said_twice_must_agree(start_task, plans, changes, said, other):
    done = start_task(**changes)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"accelbench: error: {said} contradicts " in done.stderr and other in done.stderr, done.stderr
    assert "fix: say the same in both, or leave the FlagPerf option out" in done.stderr
    assert not plans and "Traceback" not in done.stderr


@pytest.mark.parametrize("changes, extra, message", [
    ({}, ("--cluster", "configs/cluster.yaml"), "--hosts 127.0.0.1 and --cluster configs/cluster.yaml both say where"),
    ({}, ("--set", "data.path=/data/x"), "--data_dir ./GPT-3-data and --set data.path=/data/x both say what the data"),
    ({"--node_rank": "1"}, (), "--node_rank 1: accelbench starts every node of the case from this one command"),
    ({"--log_level": "loud"}, (), "--log_level 'loud': not a log level"),
    ({"--hosts_ports": "22,23"}, (), "--hosts_ports '22,23': expected one SSH port"),
    ({"--hosts": "127.0.0.1,10.0.0.2"}, (), "127.0.0.1 is this machine alone"),
    ({"--hosts": "node0;touch x"}, (), "expected host names or addresses"),
    ({"--master_port": "0"}, (), "--master_port 0: not a port"),
    ({"--data_dir": "./nowhere"}, (), "--data_dir ./nowhere:"),
    ({"--case_name": False}, (), "FlagPerf's options describe one case, and no --case_name was given"),
])
def test_what_cannot_be_taken_is_refused_with_why(start_task, plans, tmp_path, changes, extra, message):
    done = start_task(*extra, **changes)
    assert done.returncode == 2 and message in done.stderr, done.stdout + done.stderr
    assert not plans


def test_log_dir_and_log_root_must_agree(start_task, plans, tmp_path):
    done = start_task(log_root=tmp_path / "elsewhere")
    assert done.returncode == 2 and "--log_dir ./log_dir/results contradicts --log-root" in done.stderr
    assert not plans


def test_two_datasets_in_data_dir_are_refused_naming_both(start_task, plans):
    for suffix in ("_ids.npy", "_idx.npz"):
        write(start_task.data / f"other{suffix}", "")
    done = start_task()
    assert done.returncode == 2 and "expected one <prefix>_ids.npy with its <prefix>_idx.npz" in done.stderr
    assert "gpt_en_dataset_300m" in done.stderr and "other" in done.stderr


def test_round_without_a_sixth_field_is_the_repeat_and_master_port_the_clusters(start_task, plans):
    done = start_task(**{"--case_name": "gpt3_6.7B:paddle_2.5.1:A100:1:8", "--round": "3", "--hosts": False,
                         "--hosts_ports": False})
    assert done.returncode == 0, done.stderr
    (case,) = plans[0].cases
    assert (str(case.name), len(case.rounds)) == ("gpt3_6.7B:paddle_2.5.1:A100:1:8:3", 3)
    assert "--round 3: the case runs 3 round(s)" in done.stdout
    assert plans[0].cluster.master_port == 29301 and plans[0].cluster.hosts[0].backend == "local"


def test_hosts_become_ssh_nodes_with_strict_host_keys(accelbench, plans, tmp_path):
    done = accelbench("--case_name", "gpt2_tiny:torch:cpu:2:1", "--hosts", "10.0.0.1, 10.0.0.2", "--hosts_ports",
                      "2222", "--master_addr", "10.0.0.1", "--master_port", "29400", "--nnodes", "2", "--dry-run",
                      entry="start_task")
    assert done.returncode == 0, done.stderr
    nodes = plans[0].cases[0].rounds[0].nodes
    assert [(n.host.name, n.host.backend, n.host.address, n.host.port, n.host.known_hosts) for n in nodes] == [
        ("10.0.0.1", "ssh", "10.0.0.1", 2222, "~/.ssh/known_hosts"), ("10.0.0.2", "ssh", "10.0.0.2", 2222,
                                                                       "~/.ssh/known_hosts")]
    assert "--master-addr=10.0.0.1" in nodes[1].argv and "--master-port=29400" in nodes[1].argv
    assert "node 1 over SSH on port 2222, its host key checked against ~/.ssh/known_hosts and never added" in done.stdout
    too_few = accelbench("--case_name", "gpt2_tiny:torch:cpu:2:1", "--hosts", "10.0.0.1", "--dry-run",
                         entry="start_task")
    assert too_few.returncode == 2 and "asks for 2 nodes but --hosts lists 1 host(s)" in too_few.stderr


def test_options_checked_against_a_cpu_case_and_data_for_each_task(accelbench, plans, tmp_path):
    cpu = accelbench("--case_name", "gpt2_tiny:torch:cpu:1:2", "--visible_dev_env", "CUDA_VISIBLE_DEVICES",
                     "--vendor", "cpu", "--dry-run", entry="start_task")
    assert cpu.returncode == 2 and "whose variable is (none" in cpu.stderr
    write(tmp_path / "alpaca/train.jsonl", '{"instruction": "a", "output": "b"}\n')
    sft = accelbench("--case_name", "llama_tiny_sft:torch:cpu:1:2", "--data_dir", "alpaca", "--dry-run",
                     entry="start_task")
    assert sft.returncode == 0, sft.stderr
    data = plans[0].cases[0].workload.data
    assert (data.source, data.path) == ("instruction", str(tmp_path / "alpaca/train.jsonl"))
    ppo = accelbench("--case_name", "ppo_tiny:torch:cpu:1:2", "--data_dir", "alpaca", "--dry-run", entry="start_task")
    assert ppo.returncode == 2 and "case ppo_tiny (task ppo) reads no data" in ppo.stderr


def test_a_fixed_cluster_port_and_flagperfs_must_agree(accelbench, plans, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: localhost}\nmaster_port: 29500\n")
    done = accelbench("--case_name", "gpt2_tiny:torch:cpu:1:2", "--cluster", str(cluster), "--master_port", "29301",
                      "--dry-run", entry="start_task")
    assert done.returncode == 2 and f"--master_port 29301 contradicts master_port 29500 of {cluster}" in done.stderr


def test_without_flagperfs_options_nothing_changes(accelbench, plans):
    done = accelbench("--case_name", "gpt2_tiny:torch:cpu:1:2", "--dry-run", entry="start_task")
    assert done.returncode == 0 and "FlagPerf" not in done.stdout


def test_hosts_ports_without_hosts_is_checked_against_the_cluster_files_ssh_ports(accelbench, plans, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: n0, backend: ssh, address: 10.0.0.1, port: 2222}\n")
    ok = accelbench("--case_name", "gpt2_tiny:torch:cpu:1:2", "--cluster", str(cluster), "--hosts_ports", "2222",
                    "--master_addr", "10.0.0.1", "--dry-run", entry="start_task")
    assert ok.returncode == 0, ok.stderr
    assert plans[0].cases[0].rounds[0].nodes[0].host.port == 2222
    wrong = accelbench("--case_name", "gpt2_tiny:torch:cpu:1:2", "--cluster", str(cluster), "--hosts_ports", "22",
                       "--dry-run", entry="start_task")
    assert wrong.returncode == 2 and f"--hosts_ports 22 contradicts the SSH ports of {cluster}: ['2222']" in wrong.stderr

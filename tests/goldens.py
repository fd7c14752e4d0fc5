"""Golden runs: real ``accelbench run`` invocations made once per test session and read by many tests.

A golden is one CLI invocation as a user types it (a real subprocess: orchestrator, torchrun or paddle
launch, gloo ranks, monitors, the store), started the first time a test asks for it, in a session folder
no test writes to. Several cases with their own settings share one invocation through a test_conf file
(``cases: [{case, set}]``), as a user's list of cases would. A test that changes what a run left (a
repair, a damaged store, a bundle) works on a copy (``Golden.copy``).

``SHORT`` is the one spelling of "a short run" across the suite: 6 steps, the first 2 warm-up.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from .runner import ROOT, SHARED_MACHINE, CliResult, copy_tree, expect_shared_machine, run_cli

SHORT_STEPS, SHORT_WARMUP = 6, 2
SHORT = ("--set", f"train.steps={SHORT_STEPS}", "--set", f"train.warmup_steps={SHORT_WARMUP}")
SHORT_SET = {"train.steps": SHORT_STEPS, "train.warmup_steps": SHORT_WARMUP}
MICRO_SIZES = [1024, 65536]  # the message sizes of the collective micro cases (golden_micro, golden_two_nodes)
# One OpenMP thread per rank, as torchrun gives each of several ranks on a node: a lone rank's second thread only
# spins on cores the suite's three lanes share (a 1x1 SHORT run: 17.4 s of CPU at 2 threads, 11.2 s at 1, at load
# 7.5). No test reads a thread count or a speed. The goldens that are a user's command as typed keep the default.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
# A golden whose tests read no time breakdown skips its 3 steps after the measured ones (train.breakdown_steps):
# real runs with a breakdown are golden_default's, golden_two_nodes' and test_breakdown_lever.py's.
NO_BREAKDOWN = {"train.breakdown_steps": 0}
# gpt2_tiny made smaller still (tests/test_history_runs.py's model), for runs whose tests read no figure's size: a
# rank's CPU is then its imports (torch, dynamo) and little more (a SHORT rank of gpt2_tiny measured 4.2-4.9 s of CPU,
# one of this model 2.5-3.9 s, at load 7-12).
SMALL_MODEL = {"model.n_layer": 1, "model.d_model": 32, "model.seq_len": 32, "train.micro_batch_size": 1}


@dataclass(frozen=True)
class Golden:
    """What one invocation left: its exit code and output, its log root and store, its working folder."""

    result: CliResult
    workdir: Path

    @property
    def log_root(self) -> Path:
        return self.result.log_root

    @property
    def db(self) -> Path:
        return self.log_root / "results.db"

    @property
    def system_tmp(self) -> Path:
        return self.workdir / "system-tmp"

    def run_dir(self) -> Path:
        (run_dir,) = self.result.run_dirs()
        return run_dir

    def docs(self) -> list[dict]:
        """Every round's results.json, in case-folder and round order."""
        return [json.loads(p.read_text()) for run in self.result.run_dirs()
                for p in sorted(run.glob("*/round*/results.json"))]

    def doc(self, case_name: str, round: int = 1, **workload: Any) -> dict:
        """The one round of ``case_name`` whose resolved workload holds ``workload`` (dotted keys, e.g.
        ``**{"train.precision": "fp16"}``)."""
        found = [d for d in self.docs() if d["case_name"] == case_name and d["round"] == round
                 and all(_get(d["workload"], key) == value for key, value in workload.items())]
        assert len(found) == 1, f"{len(found)} rounds of {case_name} with {workload} in {self.log_root}"
        return found[0]

    @staticmethod
    def round_dir(doc: dict) -> Path:
        return Path(doc["results_path"]).parent

    def node_dir(self, doc: dict, node: str = "localhost_noderank0") -> Path:
        return self.round_dir(doc) / node

    def attempts(self) -> list[dict]:
        return self.result.attempts()

    def copy(self, target: Path) -> Path:
        """The log root copied to ``target`` (the store's paths still name the golden's folders: a copy is
        for what changes the store or the files, not for reading figures)."""
        shutil.copytree(self.log_root, target, symlinks=True)
        return target


def _get(data: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        data = (data or {}).get(part)
    return data


def test_conf(path: Path, cases: list[dict], **extra: Any) -> Path:
    """A test_conf file: ``cases`` as ``{case, set}`` entries (``set`` with dotted keys), expecting the suite's
    shared machine (runner.SHARED_MACHINE) unless ``extra`` says otherwise."""
    data = json.loads(json.dumps({"cases": cases, "contention": SHARED_MACHINE, **extra}))  # no YAML aliases
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_golden(workdir: Path, *args: str, entry: str = "accelbench", timeout: float = 900,
               expect: Optional[int] = 0, **options: Any) -> Golden:
    """One invocation into ``workdir``; ``expect``: the exit code it must end with (None: any)."""
    workdir.mkdir(parents=True, exist_ok=True)
    result = run_cli(workdir, *args, entry=entry, timeout=timeout, **options)
    if expect is not None:
        assert result.returncode == expect, (f"golden {' '.join(args)} exited {result.returncode}:\n"
                                             f"{result.stderr[-4000:]}\n{result.stdout[-4000:]}")
    return Golden(result, workdir)


# ---------------------------------------------------------------- local goldens


@pytest.fixture(scope="session")
def golden_default(tmp_path_factory) -> Golden:
    """The README's first command through start_task.py: gpt2_tiny:torch_2.13:cpu:1:2 with the case's own
    30 steps (5 warm-up)."""
    return run_golden(tmp_path_factory.mktemp("golden-default"), "--case_name", "gpt2_tiny:torch_2.13:cpu:1:2",
                      entry="start_task")


# fp16 on 2 ranks: 8 steps, enough for the loss to fall; 2 sequences of 32 tokens a micro-batch, as a CPU's fp16
# matmuls are slow (8 sequences of 128 took 2-5 s a step at load 9; 2 of 128 cost each rank ~1.5 s of CPU more
# than 2 of 32, the two cases 6 s) and the scalers' agreement needs no more
FP16_SMALL = {"train.precision": "fp16", "train.steps": 8, "train.micro_batch_size": 2, "model.seq_len": 32}
# A case that shows nothing about ranks runs one process: a 1x1 launch costs ~11 s of CPU, a 1x2 ~18 s (torchrun,
# torch and dynamo start in every process). 2 ranks: the fp16 cases here, golden_default (gpt2 DDP),
# golden_two_nodes and test_parity.py (every layout on 2 and 4 ranks: llama, bloom and LoRA adapters among them).
LOCAL_OK = [
    # (case name, settings): every one must end ok.
    # The families test_parity.py does not train through the real launcher (llama and bloom it does, on 1, 2
    # and 4 ranks); they differ only in ModelSpec's switches (gpt3's are gpt2's; opt: learned positions and relu).
    # opt_tiny (gpt2_tiny's shape) is also the one-process run: on a token file named relative to where it ran,
    # ending with a crash after every figure was written (ok, with a warning). One round: repeated rounds are
    # golden_two_nodes' (test_repeat_rounds_and_two_nodes_on_this_machine); the cases after it show the run
    # going on.
    ("opt_tiny:torch:cpu:1:1", {"data.source": "tokens", "data.path": "corpus/web", "debug.exit_code_after_end": 7}),
    ("llama_tiny_lora:torch:cpu:1:1", {}),
    ("gpt3_tiny:torch_1.9:cpu:1:1", {}),  # asks for torch 1.9 (--allow-version-mismatch)
    # fp16 with sharded or staged gradients (FP16_SMALL)
    ("gpt2_tiny:torch:cpu:1:2", {**FP16_SMALL, "parallel.sharding": "stage2"}),
    ("gpt2_tiny:torch:cpu:1:2", {**FP16_SMALL, "parallel.pipeline_parallel_degree": 2,
                                 "train.gradient_accumulation_steps": 2}),
]


@pytest.fixture(scope="session")
def golden_local(tmp_path_factory) -> Golden:
    """Every local ok path in one invocation (LOCAL_OK), each case SHORT: exit 0."""
    workdir = tmp_path_factory.mktemp("golden-local")
    made = subprocess.run([sys.executable, "-m", "training.data.make_dataset", "tokens", "--prefix", "corpus/web",
                           "--vocab-size", "1024", "--documents", "300"], cwd=workdir, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert made.returncode == 0, made.stderr
    conf = test_conf(workdir / "test_conf.yaml", [{"case": c, "set": {**SHORT_SET, **NO_BREAKDOWN, **s}}
                                                  for c, s in LOCAL_OK])
    return run_golden(workdir, "run", "--test-conf", str(conf), "--allow-version-mismatch", extra_env=ONE_THREAD)


LOCAL_FAILURES = [
    ("gpt2_tiny:torch:cpu:1:2", {"debug.fail_at_step": 4, "debug.fail_rank": 1}),      # a rank crashes
    ("gpt2_tiny:torch:cpu:1:2", {"debug.oom_at_step": 3, "debug.fail_rank": 1}),       # a rank runs out of memory
    ("gpt2_tiny:torch:cpu:1:1", {"train.precision": "fp8", "train.compile": "default"}),  # unsupported on a CPU
]


@pytest.fixture(scope="session")
def golden_failures(tmp_path_factory) -> Golden:
    """The local ways a round fails (LOCAL_FAILURES), in one invocation: exit 1, every case recorded."""
    workdir = tmp_path_factory.mktemp("golden-failures")
    conf = test_conf(workdir / "test_conf.yaml", [{"case": c, "set": {**SHORT_SET, **s}} for c, s in LOCAL_FAILURES])
    return run_golden(workdir, "run", "--test-conf", str(conf), expect=1, extra_env=ONE_THREAD)


@pytest.fixture(scope="session")
def golden_two_nodes(tmp_path_factory) -> Golden:
    """Two local "hosts" (two launchers meeting by static rendezvous, as separate machines would): first the
    all-reduce micro case on them, then gpt2_tiny 2:1 for 2 rounds into the same store (so the training run
    shows the bus bandwidth measured on its hosts). Their vendor names a monitor this machine lacks (rocm-smi):
    every round ok, with a warning."""
    workdir = tmp_path_factory.mktemp("golden-two-nodes")
    root = workdir / "root"
    for folder in ("cases", "vendors", "configs"):
        copy_tree(ROOT / folder, root / folder)
    expect_shared_machine(root / "configs" / "test_conf.yaml")
    os.symlink(ROOT / "training", root / "training")
    (root / "configs" / "cluster.yaml").write_text("hosts:\n  - {name: n0}\n  - {name: n1}\n")
    vendor = root / "vendors/cpu/vendor.yaml"  # a monitor this machine lacks: a warning (test_vendors.py)
    vendor.write_text(vendor.read_text() + "\nmonitor: rocm-smi   # overrides the cpu kind's monitor\n")
    run_golden(workdir, "run", "allreduce:torch:cpu:2:1", "--root", str(root),
               "--set", f"micro.sizes_bytes={json.dumps(MICRO_SIZES)}", "--set", "micro.iters=2", extra_env=ONE_THREAD)
    return run_golden(workdir, "run", "gpt2_tiny:torch:cpu:2:1:2", "--root", str(root), *SHORT, extra_env=ONE_THREAD)


@pytest.fixture(scope="session")
def golden_bundle(golden_two_nodes, tmp_path_factory) -> tuple[Path, str, Path]:
    """(log root, run id, bundle path) of a real two-round run (golden_two_nodes: gpt2_tiny 2:1 for 2 rounds) and
    its bundle, written by the CLI as a user writes one; tests that change it work on a copy."""
    base = tmp_path_factory.mktemp("bundle")
    run_id = golden_two_nodes.doc("gpt2_tiny:torch:cpu:2:1:2")["run_id"]
    out = base / "handed-over.tar.gz"
    made = run_cli(base, "bundle", run_id, "--db", str(golden_two_nodes.db), "-o", str(out), timeout=120)
    assert made.returncode == 0, made.stderr
    assert f"wrote {out}" in made.stdout
    return golden_two_nodes.log_root, run_id, out


# ---------------------------------------------------------------- a local run killed with SIGKILL


# The case that finishes (one process, SHORT), then the one killed while it trains (two ranks, steps enough
# never to end by itself): a round stored, and a round cut short, as two rounds of one case gave (the first of
# 40 steps on two ranks, and the second had to be long enough not to end before the kill: ~10 s of CPU more).
KILLED_CASES = [("gpt2_tiny:torch:cpu:1:1", {**SHORT_SET, **NO_BREAKDOWN}),
                ("gpt2_tiny:torch:cpu:1:2", {"train.steps": 100000, "train.warmup_steps": 1})]


@dataclass(frozen=True)
class Killed:
    """A local run of KILLED_CASES whose orchestrator got SIGKILL while the second case trained (the first's
    round had finished and was stored)."""

    log_root: Path
    pid: int
    processes_before: list[str]  # what of the run was alive just before the kill
    seconds_until_gone: float
    left: list[str]              # what was still alive once the wait gave up (must be nothing)


LOCAL_GONE_S = 5.0  # the guards end a killed local run's processes within this


@pytest.fixture(scope="session")
def golden_killed(tmp_path_factory) -> Killed:
    from .signal_faults import run_processes, seconds_until_gone, start

    workdir = tmp_path_factory.mktemp("golden-killed")
    conf = test_conf(workdir / "test_conf.yaml", [{"case": c, "set": s} for c, s in KILLED_CASES])
    orch = start(workdir, f"--test-conf={conf}")  # `accelbench run --test-conf=FILE`: no case named
    try:
        _wait_for_step(orch, "gpt2_tiny-torch-cpu-1x2")
        before = run_processes(orch.pid, [orch.log_root])
        os.kill(orch.pid, 9)  # the orchestrator alone: the second case's launcher, workers and monitor are orphaned
        orch.wait(timeout=10)
        took, left = seconds_until_gone(lambda: run_processes(orch.pid, [orch.log_root]), LOCAL_GONE_S)
    finally:
        if orch.process.poll() is None:
            orch.process.kill()
    from .checks import kill_leftovers

    kill_leftovers(orch.log_root)  # whatever a failed guard left must not outlive the session
    return Killed(orch.log_root, orch.pid, before, took, left)


def _wait_for_step(orch, case_folder: str, timeout: float = 180) -> None:
    """Until rank 0 of the case in ``case_folder`` (its first round) has logged a step."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any('"kind":"step"' in log.read_text(errors="replace")
               for log in orch.log_root.glob(f"*/{case_folder}/round1/*/torchrun/*/attempt_0/0/stdout.log")):
            return
        assert orch.process.poll() is None, f"the run ended (exit {orch.process.returncode}):\n{orch.stderr()[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"{case_folder} never trained:\n{orch.stderr()[-3000:]}")


# ---------------------------------------------------------------- over SSH and in containers

HOSTILE_WORK = "work $(touch {marker}); `touch {marker}` & echo"  # a work root that must stay a name
TESTKIND = ROOT / "tests" / "vendors" / "testkind"


def kind_root(folder: Path, image_from_cpu: bool = False) -> Path:
    """A checkout copy with the test kind's vendor folder added, as a vendor adds theirs (``image_from_cpu``:
    its torch image built from the cpu vendor's Dockerfile and wheels, as a vendor would start from one)."""
    for sub in ("cases", "vendors", "configs"):
        copy_tree(ROOT / sub, folder / sub)
    expect_shared_machine(folder / "configs" / "test_conf.yaml")
    shutil.copytree(TESTKIND, folder / "vendors" / "testkind")
    if image_from_cpu:
        copy_tree(ROOT / "vendors/cpu/docker/torch_2.13", folder / "vendors/testkind/docker/torch_2.13")
    (folder / "training").symlink_to(ROOT / "training")
    return folder


def one_thread_in_containers(root: Path) -> Path:
    """The cpu and test kind vendors of a checkout copy give their frameworks' ranks ONE_THREAD: a container's
    environment is the image's and its vendor's, not the lane's (a one-rank container spun a second thread)."""
    for vendor in ("cpu", "testkind"):
        path = root / "vendors" / vendor / "vendor.yaml"
        data = yaml.safe_load(path.read_text())
        for framework in data["frameworks"].values():
            framework["env"] = {**framework.get("env", {}), **ONE_THREAD}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return root


SSH_CASES = [
    ("gpt2_tiny:torch:cpu:2:2", {}),                                              # two hosts, two ranks each
    ("gpt2_tiny:torch:TK1:2:1", {}),                                              # the test kind over SSH
    ("gpt2_tiny:torch:cpu:2:1", {"debug.fail_at_step": 3, "debug.fail_rank": 1}),  # a rank crashes on h1
]


@pytest.fixture(scope="session")
def golden_ssh(tmp_path_factory, sshd) -> Golden:
    """SSH_CASES on hosts h0 and h1 (devices [0, 1]) in one invocation, under a work root whose name holds
    shell syntax (``marker`` must never be made): exit 1 (the crash). Each case SHORT on the small model
    without a time breakdown: its tests (test_ssh.py, test_kind_hosts.py) read no figure's size nor a breakdown."""
    workdir = tmp_path_factory.mktemp("golden-ssh")
    root = kind_root(workdir / "root")
    marker = workdir / "executed"
    work_root = workdir / HOSTILE_WORK.format(marker=marker)
    cluster = workdir / "cluster.yaml"
    cluster.write_text(sshd.cluster_yaml(count=2, python=sys.executable, work_root=f"'{work_root}'",
                                         devices="[0, 1]"))
    conf = test_conf(workdir / "test_conf.yaml",
                     [{"case": c, "set": {**SHORT_SET, **NO_BREAKDOWN, **SMALL_MODEL, **s}} for c, s in SSH_CASES])
    return run_golden(workdir, "run", "--test-conf", str(conf), "--root", str(root), "--cluster", str(cluster),
                      expect=1)


# What only a container shows, in as few nodes as shows it: two nodes (each its own container on its own host, and
# the ranks of one node in one container) where a case shows nodes together; one node where it shows an image
# (the seams of the test kind's, Paddle's without torch: their multi-node launches are golden_ssh's and
# test_paddle.py's). A node costs a launcher, a rank and a monitor, each in a container (~9 s of CPU).
CONTAINER_CASES = [
    ("gpt2_tiny:torch_2.13:cpu:2:2", {}),                                               # two ranks per container
    ("gpt2_tiny:torch_2.13:TK1:1:1", {}),                                               # the test kind's image
    ("gpt3_tiny:paddle_3.3:cpu:1:1", {}),                                               # Paddle's image, no torch
    # a rank of h0 crashes at its first step; h1's rank waits in its first all-reduce until its node is stopped
    ("gpt2_tiny:torch_2.13:cpu:2:1", {"debug.fail_at_step": 0, "debug.fail_rank": 0}),
]


@pytest.fixture(scope="session")
def golden_containers(tmp_path_factory, sshd, engine, cpu_torch_image) -> Golden:
    """CONTAINER_CASES with each node in its vendor's image on hosts h0 and h1 (devices [2]), SHORT with no
    breakdown steps, one invocation: exit 1 (the crash). The first use may build the images (minutes)."""
    workdir = tmp_path_factory.mktemp("golden-containers")
    root = one_thread_in_containers(kind_root(workdir / "root", image_from_cpu=True))
    cluster = workdir / "cluster.yaml"
    cluster.write_text(sshd.cluster_yaml(count=2, work_root=str(workdir / "hosts-work"), runtime="container",
                                         docker_host=engine.docker_host, devices="[2]"))
    conf = test_conf(workdir / "test_conf.yaml",
                     [{"case": c, "set": {**SHORT_SET, **NO_BREAKDOWN, **s}} for c, s in CONTAINER_CASES])
    return run_golden(workdir, "run", "--test-conf", str(conf), "--root", str(root), "--cluster", str(cluster),
                      expect=1, timeout=1800)


# ---------------------------------------------------------------- micro-benchmark cases

# One case per bench through the CLI (the figures into results.json, the store and `show`): the all-reduce
# runs on golden_two_nodes' two hosts at these sizes; every op at 2 and 4 ranks is test_microbench's (the
# worker's figures, one torchrun launch per world size).
MICRO_CASES = [
    ("gemm:torch:cpu:1:1", {"micro.shapes": [[32, 48, 16], [64, 64, 64]], "micro.iters": 2, "micro.warmup": 1}),
    ("membw:torch:cpu:1:1", {"micro.sizes_bytes": [1 << 20], "micro.iters": 3}),
    ("allgather:torch:cpu:1:2", {"micro.sizes_bytes": MICRO_SIZES, "micro.iters": 3, "micro.warmup": 1}),
]


@pytest.fixture(scope="session")
def golden_micro(tmp_path_factory) -> Golden:
    """torch's micro-benchmark cases (MICRO_CASES) through the CLI in one invocation: exit 0."""
    workdir = tmp_path_factory.mktemp("golden-micro")
    conf = test_conf(workdir / "test_conf.yaml", [{"case": c, "set": s} for c, s in MICRO_CASES])
    return run_golden(workdir, "run", "--test-conf", str(conf), extra_env=ONE_THREAD)

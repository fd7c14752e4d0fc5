"""One worker lifecycle for every task: pretraining, PPO and a micro-benchmark each run through their torch
entry (the functions the worker registry points at) under the same harness, in this process: the ranks read
from the launcher's variables, the vendor's worker plugin set up before the framework touches the device (PPO
never ran it before), one start and one end record. And nothing else in training/ reads a rank variable or
writes a start or end record."""
from __future__ import annotations

import os
import re

import pytest

from training.contract import perflog
from training.contract.names import RANK_VARIABLES, read_ranks
from training.contract.spec import WorkerConfig

from .conftest import ROOT
from .test_harness import acme_root  # noqa: F401 - the fixture

TINY = {"n_layer": 1, "n_head": 2, "d_model": 16, "vocab_size": 64, "seq_len": 16}
TRAIN = {"micro_batch_size": 2, "steps": 2, "warmup_steps": 1, "breakdown_steps": 0}
WORKLOADS = {
    "pretrain": {"task": "pretrain", "model": TINY, "train": TRAIN},
    "ppo": {"task": "ppo", "model": TINY, "train": TRAIN,
            "ppo": {"experience_batch_size": 2, "num_episodes": 2, "max_timesteps": 1, "update_timesteps": 1,
                    "max_epochs": 1, "prompt_length": 6, "generation_length": 4}},
    "micro": {"task": "micro", "micro": {"bench": "gemm", "shapes": [[8, 8, 8]], "warmup": 1, "iters": 2}},
}


def entry(task: str):
    """The torch entry of each task (what the worker registry names as ``module:attribute``)."""
    if task == "micro":
        from training.micro.case import run
        return run
    if task == "ppo":
        from training.torch.ppo_loop import run
        return run
    from training.torch.train import train
    return train


@pytest.fixture
def acme(acme_root, monkeypatch):
    """test_harness's kind with a worker plugin (its setup() sets ACME_PLUGIN_SETUP, its environment() reports a
    firmware), and the variables torchrun sets for one process."""
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "GROUP_RANK": "0"}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("task", list(WORKLOADS))
def test_every_task_loads_the_plugin_and_writes_one_start_and_one_end(acme, capsys, task):
    cfg = WorkerConfig.model_validate({"workload": WORKLOADS[task], "runtime": {
        "case_name": "t", "run_id": "r", "round": 1, "framework": "torch",
        "device": {"kind": "acme", "torch_device": "cpu", "worker_plugin": "vendors/acme/plugin.py"}}})
    entry(task)(cfg)
    records = [r for r in map(perflog.parse_line, capsys.readouterr().out.splitlines()) if r is not None]
    kinds = [r.kind for r in records]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("start") == kinds.count("end") == 1
    start = records[0]
    assert (start.rank, start.world_size, start.local_rank, start.node_rank) == (0, 1, 0, 0)
    assert os.environ["ACME_PLUGIN_SETUP"] == "acme"  # setup() ran in this worker (PPO's never did)
    assert start.environment["acme_firmware"] == "1.2.3"  # environment() is in the node's facts
    assert start.environment["accelerator_kind"] == "acme" and start.init_time_s is not None
    body = kinds[1:-1]
    assert ("figure" in body) if task in ("ppo", "micro") else ("figure" not in body)
    assert body.count("step") == (0 if task == "micro" else 2)


def test_the_rank_variables_are_read_in_one_place():
    spelled = {v for variables in RANK_VARIABLES.values() for v in vars(variables).values() if v}
    pattern = re.compile("|".join(rf"""["']{re.escape(v)}["']""" for v in sorted(spelled)))
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "training").rglob("*.py")
             if path.name != "names.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
    assert read_ranks("paddle", {"PADDLE_TRAINER_ID": "3", "PADDLE_TRAINERS_NUM": "4"}).world_size == 4
    with pytest.raises(ValueError, match="no launcher's rank variables for framework 'jax'"):
        read_ranks("jax", {})


def test_start_and_end_records_are_written_by_the_harness_alone():
    made = [f"{path.relative_to(ROOT)}" for path in (ROOT / "training").rglob("*.py")
            if re.search(r"\b(StartRecord|EndRecord)\(", path.read_text()) and path.name not in ("harness.py",
                                                                                                 "perflog.py")]
    assert made == []

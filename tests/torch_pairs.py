"""One spawn of two torch ranks shared by every module that looks inside workers on two ranks (session fixture
``torch_pairs``, lane inprocess).

A spawned rank costs its interpreter, torch's import and torch._dynamo's (~5 s of CPU each); the breakdown tests
(tests/test_breakdown_worker.py, test_breakdown_pipeline.py, test_ppo_breakdown_worker.py, test_breakdown_tp.py)
and tests/test_torch_worker.py each spawned their own two ranks to run their workers in turn. Here one spawn
runs them all: first each module's part that needs no group yet (``two_torch_ranks()``'s optional third item:
tests/test_torch_worker.py's worker that makes its own group and destroys it), then one default process group
made here (as tests/parity_worker.py makes it, on a rendezvous port of its own: every worker reuses it and
leaves it be, which tests/test_torch_worker.py checks), then each module's ``two_torch_ranks()`` function over
its configs, module after module, one OpenMP thread per rank as torchrun starts them. Only the modules this
session collected are asked, so one file run alone spawns for its own configs only. A failure in one module's
workers fails every module's tests that read this spawn, naming the rank and its traceback.
"""
from __future__ import annotations

import importlib
import os

import pytest

# Inductor compiles in the rank itself: with more than one compile thread its first compile starts a worker
# pool's sidecar, another interpreter importing torch, for a tiny model's few C++ kernels (the same code).
COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"

# Each with ``two_torch_ranks() -> (function(rank, world, configs) -> result, configs[, before(rank, world) ->
# result])``, run in this order.
USERS = ("test_torch_worker", "test_breakdown_worker", "test_ppo_breakdown_worker", "test_breakdown_pipeline",
         "test_breakdown_tp")


def _each_module(rank: int, world: int, jobs: dict, group_port: int) -> dict:
    """Every module's part before the group (on the spawn's port), then every module's function over its
    configs, on one process group made here on ``group_port`` (not through the store a group before it used)."""
    import torch
    import torch.distributed as dist

    from training.contract.spec import DeviceSpec
    from training.torch import device as devices

    torch.set_num_threads(1)
    os.environ.setdefault(COMPILE_THREADS, "1")  # read at the first compile (test_torch_worker's)
    results = {"before_the_group": {}}
    for module, (_, _, *before) in jobs.items():
        if before:
            results["before_the_group"][module] = before[0](rank, world)
    os.environ["MASTER_PORT"] = str(group_port)
    results["made_here"] = devices.init_process_group(DeviceSpec(kind="cpu"), torch.device("cpu"))
    for module, (function, configs, *_) in jobs.items():
        results[module] = function(rank, world, configs)
    dist.destroy_process_group()
    return results


@pytest.fixture(scope="session")
def torch_pairs(request) -> list[dict]:
    """Per rank: each collected module's result under its name, and whether the group was made before them."""
    from .torch_ranks import free_port, run_ranks  # torch: imported by the sessions that spawn, not at collection

    collected = {item.module.__name__.rsplit(".", 1)[-1] for item in request.session.items}
    jobs = {name: importlib.import_module(f"{__package__}.{name}").two_torch_ranks()
            for name in USERS if name in collected}
    return run_ranks(_each_module, 2, jobs, free_port(), timeout=900)

"""One spawn of two torch ranks shared by every module that looks inside workers on two ranks (session fixture
``torch_pairs``, lane inprocess).

A spawned rank costs its interpreter, torch's import and torch._dynamo's (~5 s of CPU each); the breakdown tests
(tests/test_breakdown_worker.py, test_breakdown_pipeline.py, test_ppo_breakdown_worker.py, test_breakdown_tp.py)
and tests/test_torch_worker.py each spawned their own two ranks to run their workers in turn. Here one spawn
runs them all: one default process group made first (as tests/parity_worker.py makes it; every worker reuses
it and leaves it be, which tests/test_torch_worker.py checks), then each module's ``two_torch_ranks()`` function
over its configs, module after module, one OpenMP thread per rank as torchrun starts them. Only the modules
this session collected are asked, so one file run alone spawns for its own configs only. A failure in one
module's workers fails every module's tests that read this spawn, naming the rank and its traceback.
"""
from __future__ import annotations

import importlib
import os

import pytest

# Inductor compiles in the rank itself: with more than one compile thread its first compile starts a worker
# pool's sidecar, another interpreter importing torch, for a tiny model's few C++ kernels (the same code).
COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"

# Each with ``two_torch_ranks() -> (function(rank, world, configs) -> result, configs)``, run in this order.
USERS = ("test_torch_worker", "test_breakdown_worker", "test_ppo_breakdown_worker", "test_breakdown_pipeline",
         "test_breakdown_tp")


def _each_module(rank: int, world: int, jobs: dict) -> dict:
    """Every module's function over its configs, on one process group made here first."""
    import torch
    import torch.distributed as dist

    from training.contract.spec import DeviceSpec
    from training.torch import device as devices

    torch.set_num_threads(1)
    os.environ.setdefault(COMPILE_THREADS, "1")  # read at the first compile (test_breakdown_tp's)
    made_here = devices.init_process_group(DeviceSpec(kind="cpu"), torch.device("cpu"))
    results = {"made_here": made_here}
    for module, (function, configs) in jobs.items():
        results[module] = function(rank, world, configs)
    dist.destroy_process_group()
    return results


@pytest.fixture(scope="session")
def torch_pairs(request) -> list[dict]:
    """Per rank: each collected module's result under its name, and whether the group was made before them."""
    from .torch_ranks import run_ranks  # torch: imported by the sessions that spawn, not at collection

    collected = {item.module.__name__.rsplit(".", 1)[-1] for item in request.session.items}
    jobs = {name: importlib.import_module(f"{__package__}.{name}").two_torch_ranks()
            for name in USERS if name in collected}
    return run_ranks(_each_module, 2, jobs, timeout=900)

"""Run a function in N real torch ranks (spawned processes, gloo on the CPU) and collect what each returns.

For tests that look inside ``TorchWorker`` on each rank (what its device holds), which the CLI's perf
records cannot show.
"""
from __future__ import annotations

import gc
import os
from typing import Any, Callable

import torch.multiprocessing as mp


def free_port() -> int:
    """A rendezvous port outside the kernel's ephemeral range, as a round's is (training/contract/ports.py): one
    from bind(0) lies in the range every outgoing connection draws from, and the other lanes' connections (gloo's
    mesh, SSH, PostgreSQL) could take it in the seconds before rank 0's store listens (EADDRINUSE)."""
    from training.contract import ports

    return ports.free_ports(1)[0]


def _child(rank: int, world: int, port: int, fn: Callable, args: tuple, queue) -> None:
    gc.disable()  # as a worker's entry does (training/collector.py); short-lived, collected where asked
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    try:
        queue.put((rank, fn(rank, world, *args), None))
    except BaseException as exc:  # the parent reports it instead of waiting for a result that never comes
        import traceback

        queue.put((rank, None, traceback.format_exc()))
        raise exc


def run_ranks(fn: Callable[..., Any], world: int, *args: Any, timeout: float = 300) -> list[Any]:
    """``fn(rank, world, *args)`` in ``world`` processes; their results by rank. ``fn`` must be importable."""
    ctx = mp.get_context("spawn")
    queue, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=_child, args=(r, world, port, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in procs:
            rank, result, error = queue.get(timeout=timeout)
            results[rank] = result
            if error:
                errors.append(f"rank {rank}:\n{error}")
                break
    finally:
        for p in procs:
            p.join(timeout=5 if errors else timeout)
            if p.is_alive():
                p.kill()
    assert not errors, "\n".join(errors)
    return [results[r] for r in range(world)]


def worker_config(model: dict, train: dict, parallel: dict | None = None, data: dict | None = None,
                  task: str = "pretrain"):
    from training.contract.spec import WorkerConfig

    workload = {"task": task, "model": model, "train": train, "parallel": parallel or {}, "data": data or {}}
    return WorkerConfig.model_validate({"workload": workload, "runtime": {
        "case_name": "test", "run_id": "test", "round": 1, "framework": "torch", "device": {"kind": "cpu"}}})


def open_worker(rank: int, world: int, cfg):
    from training.harness import Ranks
    from training.torch.train import TorchWorker

    return TorchWorker(cfg, Ranks(rank=rank, world_size=world, local_rank=rank, node_rank=0))

"""What a worker process runs, by framework and task, in the one registry style (training/contract/registry.py):
each entry by path, so a round imports only its own framework (torchx's built-in schedulers, as lazy paths). A
framework's ``START`` prepares its process and runs the entry (torch: torchrun's error record; Paddle: its CPU
threads, before paddle is imported). A new framework or task is a line here; which tasks a framework runs is
declared to the orchestrator beside it (run_benchmarks/catalog/frameworks.py ``tasks``, a test ties the two).
"""
from __future__ import annotations

from typing import Callable

from training.contract.registry import Registry
from training.contract.spec import WorkerConfig

Entry = Callable[[WorkerConfig], None]

WORKERS: Registry[Entry] = Registry("worker")
WORKERS.register("torch/pretrain", "training.torch.train:train")
WORKERS.register("torch/finetune", "training.torch.train:train")
WORKERS.register("torch/lora", "training.torch.train:train")
WORKERS.register("torch/ppo", "training.torch.ppo_loop:run")  # the RLHF loop times its own phases
WORKERS.register("torch/micro", "training.micro.case:run")
WORKERS.register("paddle/pretrain", "training.paddle.train:train")
WORKERS.register("paddle/finetune", "training.paddle.train:train")
WORKERS.register("paddle/lora", "training.paddle.train:train")
WORKERS.register("paddle/micro", "training.micro.case:run")

# framework -> start(cfg, load): prepares the process, then runs ``load()``'s entry
START: Registry[Callable[[WorkerConfig, Callable[[], Entry]], None]] = Registry("worker framework")
START.register("torch", "training.torch.process:start")
START.register("paddle", "training.paddle.process:start")


def tasks_of(framework: str) -> list[str]:
    """The tasks a framework has a worker for."""
    return [name.split("/", 1)[1] for name in WORKERS if name.split("/", 1)[0] == framework]


def run(cfg: WorkerConfig) -> None:
    framework, task = cfg.runtime.framework, cfg.workload.task
    if f"{framework}/{task}" not in WORKERS:
        raise SystemExit(f"framework {framework!r} has no {task} worker in this accelbench "
                         f"(workers: {', '.join(WORKERS)})")
    START.get(framework)(cfg, lambda: WORKERS.get(f"{framework}/{task}"))

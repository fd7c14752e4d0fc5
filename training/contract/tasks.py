"""The tasks a workload may be, each with the properties both halves read of it, declared once: who asks
``task == "micro"`` to mean "has no training steps" asks ``TASKS[task].trains`` instead. Which worker runs a
task for a framework is the worker half's (training/workers.py); which tasks a framework runs, the catalog's
declaration (run_benchmarks/catalog/frameworks.py). Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class TaskSpec:
    name: str
    trains: bool = True  # training steps over a model: step records, batches, tokens, a time breakdown
    phased: bool = False  # each learning update is phases of their own (PPO): figures and breakdown per phase
    instruction: bool = False  # trains on instruction data (prompt + answer), not token streams
    reads_data: bool = True  # reads a dataset (PPO generates from random prompts; a micro-benchmark reads none)


TASKS: Mapping[str, TaskSpec] = {task.name: task for task in (
    TaskSpec("pretrain"),
    TaskSpec("finetune", instruction=True),
    TaskSpec("lora", instruction=True),
    TaskSpec("ppo", phased=True, reads_data=False),
    TaskSpec("micro", trains=False, reads_data=False),  # a micro-benchmark: its figures are its result (micro.py)
)}


def task_of(name: str) -> TaskSpec:
    """A task's declaration (an unknown name is refused by the workload's schema before any reader asks)."""
    return TASKS[name]

"""Schedulers as peers: where a round's nodes come from, how they are started, followed and ended.

``hosts``: the cluster file's host list, each node started on its host by its node runtime (this machine
by default, or over SSH). ``slurm``: one ``sbatch`` job per round, followed with Slurm's own tools.
``kubernetes``: one Indexed Job per round through the official client (imported only when used). A new
scheduler subclasses ``Scheduler`` and registers under its name with ``@SCHEDULERS.register(name)``;
``ClusterSpec.scheduler`` names one.
"""
from __future__ import annotations

from run_benchmarks.backends.schedulers.base import SCHEDULERS, Scheduler
from run_benchmarks.backends.schedulers import hostlist, k8s, slurm  # noqa: F401 - the built-in schedulers register themselves


def get(name: str) -> type[Scheduler]:
    return SCHEDULERS.get(name, "set scheduler in the cluster config")


__all__ = ["SCHEDULERS", "Scheduler", "get"]

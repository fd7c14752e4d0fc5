"""Schedulers as peers: where a round's nodes come from, how they are started, followed and ended.

``hosts``: the cluster file's host list, each node started on its host by its node runtime (this machine
by default, or over SSH). ``slurm``: one ``sbatch`` job per round, followed with Slurm's own tools.
``kubernetes``: one Indexed Job per round through the official client (imported only when used). A new
scheduler subclasses ``Scheduler`` and registers under its name with ``@SCHEDULERS.register(name)``;
``ClusterSpec.scheduler`` names one. The built-in ones are registered by path: only the one a cluster
names is imported (the Kubernetes and Slurm modules cost a local run ~0.2 s of start-up before its
launcher starts).
"""
from __future__ import annotations

from run_benchmarks.backends.schedulers.base import SCHEDULERS, Scheduler

SCHEDULERS.register("hosts", f"{__name__}.hostlist:HostList")
SCHEDULERS.register("slurm", f"{__name__}.slurm:Slurm")
SCHEDULERS.register("kubernetes", f"{__name__}.k8s:Kubernetes")


def get(name: str) -> type[Scheduler]:
    return SCHEDULERS.get(name, "set scheduler in the cluster config")


__all__ = ["SCHEDULERS", "Scheduler", "get"]

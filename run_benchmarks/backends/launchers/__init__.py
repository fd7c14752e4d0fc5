"""Launchers as an axis of their own, beside hosts, runtimes and schedulers (ReFrame keeps its launchers apart
from its schedulers): how one node starts a framework's ranks. A launcher owns the argv it is started with,
where it leaves each rank's output while the round runs and how that is gathered after, and what its start
errors look like (a round whose ranks never met is run again, not recorded).

A framework names its launcher (``Framework.launcher`` in catalog/frameworks.py); the catalog only declares.
A new launcher (mpirun, deepspeed) is one module with a ``Launcher`` subclass and one registration below,
by path: only the launcher a case uses is imported.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from run_benchmarks.backends.launchers.base import LAUNCHERS, Launcher, NodeLaunch

if TYPE_CHECKING:
    from run_benchmarks.plan import CasePlan

LAUNCHERS.register("torchrun", f"{__name__}.torchrun:Torchrun")
LAUNCHERS.register("paddle.distributed.launch", f"{__name__}.paddle:PaddleLaunch")


def get(name: str) -> Launcher:
    return LAUNCHERS.get(name, "a framework names its launcher (launcher in run_benchmarks/catalog/frameworks.py)")


def of(case: "CasePlan") -> Launcher:
    """The launcher that starts the case's ranks: its framework's."""
    return get(case.framework.launcher)


__all__ = ["LAUNCHERS", "Launcher", "NodeLaunch", "get", "of"]

"""Samplers of a node's host and accelerators, run beside the workers (``python -m training.monitor``).

One interface: ``open()`` returns a sampler or raises ``Unavailable`` (library missing, no device);
``sample()`` returns one JSON-able dict. The loop writes one line per sample and interval to
``host.jsonl`` and ``accelerator.jsonl``, and ``status.json`` saying which samplers run, so the
orchestrator can turn a monitor that could not start into a warning, never into a failed run
(file schema ``training.contract.MONITOR_SCHEMA``). The accelerator monitor is the accelerator kind's:
a built-in sampler by name, or a vendor's command with a parser (``command.py``), read from the
worker config. Standard library plus psutil (host) and the vendor's library (NVML) where present.
"""
from __future__ import annotations

import importlib
from typing import Callable

from training.contract.monitors import MONITORS
from training.contract.registry import Registry
from training.monitor.sampler import Sampler, ToolKilled, Unavailable

__all__ = ["ACCELERATORS", "Sampler", "ToolKilled", "Unavailable", "describe", "opener"]


# accelerator monitor name (vendor.yaml ``monitor``) -> the ``open()`` that makes its sampler, imported on use:
# one entry per monitor the contract declares (training/contract/monitors.py), by path
ACCELERATORS: Registry[Callable[[], Sampler]] = Registry("accelerator monitor")
for _monitor in MONITORS.values():
    ACCELERATORS.register(_monitor.name, f"{__name__}.{_monitor.sampler}:open")


def opener(kind) -> Callable[[], Sampler]:
    """The opener of a sampler: ``host``, a built-in accelerator monitor's name, or a ``CommandMonitorSpec``."""
    if not isinstance(kind, str):
        command = importlib.import_module(f"{__name__}.command")
        return lambda: command.open(kind)
    if kind == "host":
        return importlib.import_module(f"{__name__}.host").open
    if kind not in ACCELERATORS:
        raise Unavailable(f"no accelerator monitor {kind!r} (known: {', '.join(ACCELERATORS)})")
    return ACCELERATORS.get(kind)


def describe(kind) -> str:
    return kind if isinstance(kind, str) else f"command: {kind.command[0]}"

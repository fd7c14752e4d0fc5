"""The built-in accelerator monitors a kind or a vendor may name (vendor.yaml ``monitor``), declared once for
both halves: the worker's sampler of each (training/monitor registers one per entry, from ``sampler``) and what
that sampler needs importable on a node (``accelbench vendor check`` warns where it is missing). A vendor's own
tool is a command monitor instead (``CommandMonitorSpec``), declared in its vendor.yaml. Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Optional


@dataclass(frozen=True)
class MonitorSpec:
    name: str
    sampler: str  # its module in training/monitor/, whose open() makes the sampler
    needs: Optional[str] = None  # the Python module the sampler imports on the node (None: it runs a tool)
    install: Optional[str] = None  # the pip distribution that provides ``needs``


MONITORS: Mapping[str, MonitorSpec] = {monitor.name: monitor for monitor in (
    MonitorSpec("nvml", "nvml", needs="pynvml", install="nvidia-ml-py"),
    MonitorSpec("rocm-smi", "rocm_smi"),
    MonitorSpec("cpu", "cpu", needs="psutil", install="psutil"),
)}
NO_MONITOR = "none"  # no accelerator monitor: the host's is still sampled
MONITOR_NAMES = (*MONITORS, NO_MONITOR)
MonitorName = Literal[MONITOR_NAMES]  # what a vendor.yaml may write as its monitor

"""Which memory figure a view shows for a row, and what it is called: one choice, made here for every view.

A round can hold up to three memory figures per device, each meaning something else:

- ``device in use``: the accelerator monitor's reading of the device (NVML / the vendor tool's ``memory.used``):
  the allocator's cache, the framework's context and anything else on the device. What published
  actual / total tables (FlagPerf's) show.
- ``reserved``: the framework allocator's peak of memory it holds (``max_memory_reserved``).
- the worker's own peak (``peak_memory_bytes``), named by its ``memory_kind``: ``allocated`` (the framework
  allocator's peak handed to tensors), ``rss`` (a CPU process's peak resident set), or an import's own name.

The run's table, ``report``, ``show``, ``compare`` and the memory chart all show the first of these a row has,
named; ``show`` lists the others beside it, each named.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

DEVICE_IN_USE = "device_memory_used_bytes"
RESERVED = "peak_memory_reserved_bytes"
PEAK = "peak_memory_bytes"
ORDER = (DEVICE_IN_USE, RESERVED, PEAK)
SOURCE = {DEVICE_IN_USE: "the monitor", RESERVED: "the framework's allocator", PEAK: "the worker"}
PEAK_SOURCE = {"allocated": "the framework's allocator", "rss": "the process", "reserved": "the framework's allocator"}


@dataclass(frozen=True)
class MemoryFigure:
    key: str  # the store column it comes from
    name: str  # device in use | reserved | allocated | rss | an import's memory kind
    value: float

    @property
    def source(self) -> str:
        if self.key != PEAK or self.name == "peak":
            return SOURCE[self.key]
        return PEAK_SOURCE.get(self.name, "the log")  # an import's own name for it (MLPerf's max_memory_usage)

    @property
    def label(self) -> str:
        """``device in use, from the monitor``: the definition and where it comes from."""
        return f"{self.name}, from {self.source}"


def name_of(key: str, kind: Optional[str]) -> str:
    return {DEVICE_IN_USE: "device in use", RESERVED: "reserved"}.get(key) or kind or "peak"


def figures(get: Callable[[str], Optional[float]], kind: Optional[str]) -> list[MemoryFigure]:
    """Every memory figure a row has, the one its views show first (see the module's docstring)."""
    out = []
    for key in ORDER:
        value = get(key)
        if isinstance(value, (int, float)) and value > 0:
            out.append(MemoryFigure(key, name_of(key, kind), float(value)))
    return out


def headline(get: Callable[[str], Optional[float]], kind: Optional[str]) -> Optional[MemoryFigure]:
    found = figures(get, kind)
    return found[0] if found else None


def common_key(kinds_a: list[tuple[str, str]], kinds_b: list[tuple[str, str]]) -> Optional[str]:
    """The store key of the first definition both sides of a compare have (``kinds_*``: their (key, name)
    pairs in view order). The pair, not the key alone: ``peak_memory_bytes`` is ``allocated`` (a device) on one
    row and ``rss`` (a CPU process) on another, and two definitions are never compared with each other."""
    return next((key for key, name in kinds_a if (key, name) in kinds_b), None)

"""Rendezvous ports for rounds, picked below the kernel's ephemeral range.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range it draws from
for every outgoing connection. A run plans every round's port at the start, so by the time a later round
(or a sweep's point) starts, any client socket on the host may hold that port and the launcher's store fails
with EADDRINUSE. Ports below the range are never given to clients, so a port free at planning stays free
unless something listens on it on purpose.
"""
from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default, used where the file cannot be read
LOWEST = 10_000  # below this live well-known and registered services


def ephemeral_range(path: Path = _RANGE_FILE) -> tuple[int, int]:
    try:
        low, high = (int(v) for v in path.read_text().split())
        return (low, high) if 0 < low <= high <= 65535 else _DEFAULT_EPHEMERAL
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL


def candidate_ports(ephemeral: tuple[int, int]) -> range:
    """The wider of the two stretches outside the ephemeral range (and above LOWEST)."""
    low, high = ephemeral
    below = range(LOWEST, max(LOWEST, low))
    above = range(min(65536, high + 1), 65536)
    return below if len(below) >= len(above) else above


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """``count`` distinct ports that nothing listens on now, outside the ephemeral range."""
    found = []
    for port in _random_order(list(candidate_ports(ephemeral_range())), rng or random.SystemRandom()):
        if len(found) == count:
            break
        if bindable(port):
            found.append(port)
    if len(found) < count:
        raise RuntimeError(f"only {len(found)} of {count} rendezvous ports are free outside the ephemeral range")
    return found


def _random_order(items: list[int], rng: random.Random):
    """``items`` in a uniformly random order, drawn as they are taken (Fisher-Yates, lazily): a run takes
    a port or two of ~22,000, and shuffling them all cost ~0.1 s of its start-up."""
    for i in range(len(items)):
        j = rng.randrange(i, len(items))
        items[i], items[j] = items[j], items[i]
        yield items[i]

"""The node's environment, as seen from inside the worker (container or host).

Read by local rank 0 of every node and sent in its start record, so each
figure carries the machine that produced it.
"""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Optional


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _os_name() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def memory_total_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def node_environment() -> dict:
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_bytes": memory_total_bytes(),
        "os": _os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), so a worker can say how long it took to get
    from launch to its first step without the launcher passing a clock in."""
    try:
        with open("/proc/self/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="utf-8") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 (starttime), counted after "comm)"
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started)


def start_environment(pid: int, proc: Path = Path("/proc")) -> Optional[dict[bytes, bytes]]:
    """The environment process ``pid`` was started with (/proc/PID/environ: what it changed in its own since does
    not show), or None where that cannot be read (gone, another user's, no /proc)."""
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    return dict(entry.partition(b"=")[::2] for entry in raw.split(b"\0") if entry)

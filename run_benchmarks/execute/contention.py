"""Was a round's measurement clean? Its nodes' contention counters read over the measured steps, against limits.

The monitor writes cumulative counters with every host sample (training/monitor/contention.py), so a window is
the difference of two samples: the last one at or before the first measured step's start and the first one
at or after the last step's end (the workers' step records give both on the wall clock). The figures thus
cover the measured steps, widened to the samples around them (``covered_s``), however short the steps are;
start-up and compilation stay out but for that margin. Where the workers gave no window, the whole round is
read and the figures say so.

Per node: others' CPU share of the run's cores, CPU steal, memory pressure (PSI), the load average, and the
processes that are not the run's on its devices; results/figures/contention.py judges them against the limits. Who the
others were (pids, names, CPU seconds) is kept for ``show --verbose``, never in a warning.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator, Optional, Sequence

from training.contract.names import MONITOR_ACCELERATOR_FILE, MONITOR_HOST_FILE

from run_benchmarks.execute import monitoring
from run_benchmarks.results.figures.contention import judge, warning  # noqa: F401 - the round's verdict, re-exported

OTHERS_KEPT = 8


def _lines(path: Path) -> Iterator[dict]:
    """The monitor file's samples that carry their time."""
    return (s for s in monitoring.read_samples(path) if isinstance(s, dict) and isinstance(s.get("t"), (int, float)))


def _bracket(samples: list[dict], window: Optional[tuple[float, float]]) -> tuple[Optional[dict], Optional[dict]]:
    """The samples around the window (the whole series without one), on the same cores at both ends."""
    if len(samples) < 2:
        return None, None
    if window is None:
        first, last = samples[0], samples[-1]
    else:
        before = [s for s in samples if s["t"] <= window[0]]
        after = [s for s in samples if s["t"] >= window[1]]
        first, last = (before[-1] if before else samples[0]), (after[0] if after else samples[-1])
    cpus = last["contention"].get("cpus")
    if first["contention"].get("cpus") != cpus:  # the run's processes appeared after it: from where they did
        first = next((s for s in samples if s["contention"].get("cpus") == cpus and s["t"] < last["t"]), None)
    return (first, last) if first is not None and first["t"] < last["t"] else (None, None)


def _share(part: Optional[float], whole: Optional[float]) -> Optional[float]:
    if part is None or not whole or whole <= 0:
        return None
    return min(1.0, max(0.0, part / whole))


def node_figures(folder: Path, window: Optional[tuple[float, float]], run_devices: Optional[Sequence[int]] = None
                 ) -> dict:
    """One node's contention figures over the window (``run_devices``: the device indices the run was given,
    None for all); ``{"measured": False, "why": ...}`` where the monitor left no counters."""
    samples = [s for s in _lines(folder / MONITOR_HOST_FILE) if isinstance(s.get("contention"), dict)]
    first, last = _bracket(samples, window)
    if first is None:
        return {"measured": False, "why": "no contention counters in the monitor's samples (monitor off, not Linux, "
                                          "or fewer than two samples)"}
    inside = [s["contention"] for s in samples if first["t"] <= s["t"] <= last["t"]]
    figures = figures_between(first, last, inside, "measured steps" if window else "whole round")
    own_seen = figures.get("others_why") is None
    own_pids = {pid for c in inside for pid in c.get("own_pids") or []}
    figures["device_others"] = _device_others(folder, first["t"], last["t"], own_pids if own_seen else None,
                                              run_devices)
    return figures


def figures_between(first: dict, last: dict, inside: list[dict], window: str = "measured steps",
                    own_needed: bool = True) -> dict:
    """The figures of the interval between two samples (``inside``: the counters of every sample in it):
    others' CPU share of the run's cores, steal, memory pressure, the load average, the busiest others.
    ``own_needed``: others' CPU is only told where the run's processes were seen (a probe between rounds
    has none to see)."""
    a, b = first["contention"], last["contention"]
    delta = {k: (b.get(k) - a.get(k)) if isinstance(a.get(k), (int, float)) and isinstance(b.get(k), (int, float))
             else None for k in ("busy_s", "steal_s", "total_s", "own_cpu_s", "psi_memory_some_s")}
    seconds = last["t"] - first["t"]
    own_seen = not own_needed or min(c.get("own_processes") or 0 for c in (a, b)) > 0
    others_s = None if not own_seen or delta["busy_s"] is None or delta["own_cpu_s"] is None \
        else max(0.0, delta["busy_s"] - delta["own_cpu_s"])
    loads = [c["load1"] for c in inside if isinstance(c.get("load1"), (int, float))]
    figures = {
        "measured": True, "covered_s": round(seconds, 3), "window": window,
        "cores": b.get("cpus"), "machine_cpus": b.get("machine_cpus"),
        "others_cpu_share": _share(others_s, delta["total_s"]),
        "steal_share": _share(delta["steal_s"], delta["total_s"]),
        "memory_pressure_share": _share(delta["psi_memory_some_s"], seconds),
        "load_average": round(math.fsum(loads) / len(loads), 2) if loads else None,
        "others": _others(inside[1:], delta["total_s"]),
    }
    if not own_seen:
        figures["others_why"] = ("the monitor saw none of the run's processes (a container's own PID namespace, "
                                 "or started by hand): their CPU cannot be told from others'")
    if figures["load_average"] is not None and b.get("machine_cpus"):
        figures["load_per_core"] = round(figures["load_average"] / b["machine_cpus"], 3)
    return figures


def _others(samples: list[dict], total_s: Optional[float]) -> list[dict]:
    """The busiest processes that are not the run's, summed over the samples after the window's first."""
    used: dict[int, list] = {}
    for c in samples:
        for pid, name, seconds in c.get("others") or []:
            entry = used.setdefault(pid, [name, 0.0])
            entry[1] += seconds
    ranked = sorted(used.items(), key=lambda item: -item[1][1])[:OTHERS_KEPT]
    return [{"pid": pid, "name": name, "cpu_s": round(seconds, 2), "share": _share(seconds, total_s)}
            for pid, (name, seconds) in ranked]


def _device_others(folder: Path, start: float, end: float, own_pids: Optional[set],
                   run_devices: Optional[Sequence[int]]) -> Optional[dict]:
    """Processes that are not the run's on its devices, with their utilisation where the monitor read it;
    None where no device listed its processes."""
    listed, found = False, {}
    for sample in _lines(folder / MONITOR_ACCELERATOR_FILE):
        if not start <= sample["t"] <= end:
            continue
        for device in sample.get("devices") or []:
            if run_devices is not None and device.get("index") not in run_devices:
                continue
            if not isinstance(device.get("processes"), list):
                continue
            listed = True
            for pid, util, memory in (p for p in device["processes"] if isinstance(p, list) and len(p) == 3):
                if own_pids is not None and pid not in own_pids:
                    entry = found.setdefault((device.get("index"), pid), {"device": device.get("index"), "pid": pid,
                                                                         "util_percent": None, "mem_used_bytes": None})
                    if isinstance(util, (int, float)):
                        entry["util_percent"] = max(entry["util_percent"] or 0, util)
                    if isinstance(memory, (int, float)):
                        entry["mem_used_bytes"] = max(entry["mem_used_bytes"] or 0, memory)
    if not listed:
        return None
    if own_pids is None:
        return {"count": None, "why": "the run's own processes were not seen: others cannot be told apart"}
    return {"count": len(found), "processes": sorted(found.values(), key=lambda p: (p["device"], p["pid"]))}

"""What the node monitors recorded (training/monitor), turned into figures that join the results.

Per node: host CPU, memory, network and disk; per device the mean and max of utilisation, power and
temperature, memory used, and energy (power integrated over the samples, trapezoid rule). Per
round: the energy of all devices and tokens per joule = tokens/s total / mean total power, the latter over
the measured steps only (None otherwise: the steps' tokens over start-up's power would be no figure at all);
``energy`` derives energy per token and tokens per kWh from that one figure.

The figures are read over the measured steps: the samples taken between the start of the first measured
step and the end of the last (the workers' step records carry the wall clock at each step's end), so the
start-up, compilation and warm-up, which on a GPU can take longer than the steps themselves, do not dilute
utilisation and power (on an H100, gpt2_xl read 10-17 % utilisation and a third of the power over the whole
round). Where no sample falls in that window (steps shorter than the sampling interval) or the workers
did not report it, the whole round is used and the summary says so (``window``). The series for plots
always cover the whole round. A monitor that could not start, or wrote nothing, becomes a warning, never a
failure.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterator, Optional

from training.contract.names import MONITOR_ACCELERATOR_FILE, MONITOR_HOST_FILE, MONITOR_SCHEMA, MONITOR_STATUS_FILE

SERIES_POINTS = 200  # samples kept per device for plots


def read_samples(path: Path) -> Iterator[dict]:
    """The JSON lines of a monitor file (a line stopped mid-write is left out)."""
    if not path.is_file():
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a monitor stopped mid-write


def _stats(values: list) -> Optional[dict]:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return None
    return {"mean": math.fsum(values) / len(values), "max": max(values)}


def _energy(points: list[tuple[float, float]]) -> Optional[float]:
    if len(points) < 2:
        return None
    return math.fsum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(points, points[1:]))


def _thin(points: list, n: int = SERIES_POINTS) -> list:
    if len(points) <= n:
        return points
    step = len(points) / n
    return [points[int(i * step)] for i in range(n)]


MEASURED_STEPS, WHOLE_ROUND = "measured steps", "whole round"


def _within(samples: list[dict], window: Optional[tuple[float, float]]) -> tuple[list[dict], str]:
    """The samples inside the window and which window that is; all of them where none falls inside."""
    if window is not None:
        inside = [s for s in samples if isinstance(s.get("t"), (int, float)) and window[0] <= s["t"] <= window[1]]
        if inside:
            return inside, MEASURED_STEPS
    return samples, WHOLE_ROUND


def summarize_node(folder: Path, window: Optional[tuple[float, float]] = None) -> tuple[dict, list[str]]:
    """(figures, warnings) of one node's monitor folder; figures over ``window`` (wall clock, the measured
    steps) where a sample falls inside it."""
    warnings: list[str] = []
    status_file = folder / MONITOR_STATUS_FILE
    if not status_file.is_file():
        return {}, [f"the monitor left nothing in {folder} (did it start? see monitor.log beside it)"]
    status = json.loads(status_file.read_text(encoding="utf-8"))
    if status.get("schema", MONITOR_SCHEMA) != MONITOR_SCHEMA:
        return {"status": status}, [f"the monitor in {folder} wrote {status['schema']}; this accelbench reads "
                                    f"{MONITOR_SCHEMA} (a different training/ on the node?)"]
    for name in ("host", "accelerator"):
        if str(status.get(name, "")).startswith(("unavailable", "stopped")):
            warnings.append(f"{name} monitor {status[name]}")
    out: dict = {"status": status}
    host, host_window = _within(list(read_samples(folder / MONITOR_HOST_FILE)), window)
    if host:
        out["host"] = {key: _stats([s.get(key) for s in host]) for key in
                       ("cpu_percent", "mem_used_bytes", "net_rx_bps", "net_tx_bps", "disk_read_bps", "disk_write_bps")}
        out["host"]["mem_total_bytes"] = host[-1].get("mem_total_bytes")
        out["duration_s"] = host[-1]["t"] - host[0]["t"]
    every = list(read_samples(folder / MONITOR_ACCELERATOR_FILE))
    refused = [reason for sample in every for reason in sample.get("refused") or [] if isinstance(reason, str)]
    if refused:  # the monitor left out readings no device gives (training/contract/readings.py)
        warnings.append(f"the accelerator monitor refused {len(refused)} impossible or unreadable reading(s) in "
                        f"{folder} "
                        f"(left out of the figures), e.g. {refused[0]}: does the kind's monitor parse its tool's "
                        "output right (its columns or pattern)? `accelbench vendor check` shows what it parses")
    samples, accelerator_window = _within(every, window)
    out["window"] = {"accelerator": accelerator_window, "host": host_window,
                     **({"start": window[0], "end": window[1]} if window else {})}
    t0 = every[0]["t"] if every else 0.0
    out["devices"] = []
    whole = _by_device(every)
    for index, readings in sorted(_by_device(samples).items()):
        series = whole[index]
        power = [(t, d["power_w"]) for t, d in readings if isinstance(d.get("power_w"), (int, float))]
        out["devices"].append({
            "index": index, "name": readings[0][1].get("name"),
            **{key: _stats([d.get(key) for _, d in readings]) for key in ("util_percent", "power_w", "temp_c")},
            "mem_used_bytes": _stats([d.get("mem_used_bytes") for _, d in readings]),
            "mem_total_bytes": readings[-1][1].get("mem_total_bytes"),
            "energy_j": _energy(power),
            "power_from": next((d["power_from"] for _, d in readings if isinstance(d.get("power_from"), str)),
                               "power samples" if power else None),
            "util_series": _thin([[round(t - t0, 2), d.get("util_percent")] for t, d in series
                                  if d.get("util_percent") is not None]),
            "power_series": _thin([[round(t - t0, 2), d["power_w"]] for t, d in series
                                   if isinstance(d.get("power_w"), (int, float))]),
        })
    if not every and not str(status.get("accelerator", "")).startswith(("unavailable", "off")):
        warnings.append(f"the accelerator monitor wrote no sample in {folder}")
    return out, warnings


def _by_device(samples: list[dict]) -> dict[int, list[tuple[float, dict]]]:
    devices: dict[int, list[tuple[float, dict]]] = {}
    for sample in samples:
        for device in sample.get("devices") or []:
            devices.setdefault(device.get("index", 0), []).append((sample["t"], device))
    return devices


def summarize_round(nodes: list[dict], tokens_per_s_total: Optional[float]) -> dict:
    """The round's monitor figures from its nodes' summaries; ``window`` says what they were read over
    (the measured steps only where every node had a sample inside them)."""
    devices = [d for node in nodes for d in node.get("devices", [])]
    utils = [d["util_percent"]["mean"] for d in devices if d.get("util_percent")]
    powers = [d["power_w"]["mean"] for d in devices if d.get("power_w")]
    energies = [d["energy_j"] for d in devices if d.get("energy_j") is not None]
    total_power = math.fsum(powers) if powers and len(powers) == len(devices) else None
    in_use = [d["mem_used_bytes"]["max"] for d in devices if d.get("mem_used_bytes")]
    window = MEASURED_STEPS if nodes and all((n.get("window") or {}).get("accelerator") == MEASURED_STEPS
                                             for n in nodes) else WHOLE_ROUND
    return {
        # the driver's view of device memory in use (allocator, cache, context), what published tables show
        "device_memory_used_bytes": max(in_use) if in_use else None,
        "accel_util_mean": math.fsum(utils) / len(utils) if utils else None,
        "power_w_mean": total_power,
        "energy_j": math.fsum(energies) if energies and len(energies) == len(devices) else None,
        # the measured steps' tokens over their own power only: over the whole round, start-up's idle power
        # would stand beside the steps' tokens (found on an H200: a 5 ms-step model read 1,942 tokens/J)
        "tokens_per_joule": tokens_per_s_total / total_power
        if tokens_per_s_total and total_power and window == MEASURED_STEPS else None,
        "window": window,
        "nodes": nodes,
    }


JOULES_PER_KWH = 3.6e6
COUNTER_METHOD = "counter: the energy counter's differences between samples (RAPL), averaged over the measured steps"
SAMPLES_METHOD = "integrated samples: the monitor's power readings, averaged over the measured steps"


def energy(monitor: Optional[dict], tokens_per_s_total: Optional[float]) -> dict:
    """Energy per token and tokens per kWh over the measured steps only (warm-up excluded): every device's
    mean power over the window summed, over the round's tokens/s; the method says where the power came from.
    Nothing where no device gave power or no sample fell inside the measured steps."""
    devices = [d for node in (monitor or {}).get("nodes") or [] for d in node.get("devices") or []]
    if not devices or not all(d.get("power_w") for d in devices):
        return {"energy_per_token_j": None, "tokens_per_kwh": None, "method": None,
                "note": "no power reading" + ("" if devices else " (no device monitored)")}
    if monitor.get("window") != MEASURED_STEPS:
        return {"energy_per_token_j": None, "tokens_per_kwh": None, "method": None,
                "note": "no power sample inside the measured steps (steps shorter than the sampling interval): "
                        "not read over the whole round, whose warm-up would count"}
    per_joule = monitor.get("tokens_per_joule")  # summarize_round's one figure, over the same window
    if not tokens_per_s_total or not per_joule:
        return {"energy_per_token_j": None, "tokens_per_kwh": None, "method": None, "note": "no tokens/s"}
    counter = all(d.get("power_from") == "energy counter" for d in devices)
    return {"energy_per_token_j": 1 / per_joule, "tokens_per_kwh": per_joule * JOULES_PER_KWH,
            "power_w": monitor.get("power_w_mean"), "method": COUNTER_METHOD if counter else SAMPLES_METHOD,
            "note": None}

"""A vendor smi tool's output -> device readings (``CommandMonitorSpec``), and the readings no device can give.

Shared by the node's monitor (training/monitor/command.py, every interval) and ``accelbench vendor check``
(which runs the tool once where it is installed and shows what was parsed): one parser, so the check reads
the output exactly as a run would.

A misparsed tool must never become a figure: a CSV line whose field count is not the number of ``columns``
is refused (6 names for 7 fields read the memory column as power: "131,072 W"; a one-field line is a message,
not a reading). One such line (a tool's odd line) is left out and named under ``refused``; when every line
is one, the output cannot be read (``ColumnsMismatch``: most likely wrong columns). Each impossible
reading. The bounds are stated, not tuned: utilisation is a percentage (0-100), memory used cannot pass the
device's total, no accelerator draws more than ``POWER_BOUND_W`` (the largest parts today are rated 1.0-1.4 kW).
"""
from __future__ import annotations

import csv
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: the monitor imports this module, and pydantic with the spec would cost it
    # ~0.3 s of CPU while the ranks beside it start (a command monitor's spec is validated where it is read)
    from training.contract.monitor_spec import CommandMonitorSpec, ProcessQuerySpec

POWER_BOUND_W = 2000.0


class ReadingError(ValueError):
    """The tool's output cannot be read as the spec says (the message says why and shows the line)."""


class ColumnsMismatch(ReadingError):
    """Every reading line had another field count than ``columns`` names: the columns, most likely, are wrong."""


def _value(field: str, text: str, scale: dict[str, float]):
    text = text.strip()
    if field == "name":
        return text or None
    match = re.search(r"-?\d+(?:\.\d+)?", text)  # "312 W", "45C", "1024MiB": the number, in the tool's unit
    if match is None:
        return None
    number = float(match.group()) * scale.get(field, 1.0)
    return int(number) if field in ("index", "pid") else number


def parse(spec: CommandMonitorSpec, output: str) -> dict:
    """``{"devices": [...]}``: one reading per CSV line or regex match, impossible fields refused (``check``)."""
    devices, mismatched = [], []
    if spec.format == "csv":
        for row in csv.reader(line for line in output.splitlines() if line.strip()):
            if len(row) == 1 and len(spec.columns) > 1:
                continue  # a message, not a reading ("No devices were found"): no reading is said below
            if len(row) != len(spec.columns):
                mismatched.append(f"{spec.command[0]} printed {len(row)} field(s) on a line, but the monitor's "
                                  f"columns name {len(spec.columns)} ({', '.join(spec.columns)}): "
                                  f"{', '.join(row)[:200]!r}; give columns one name per field ('-' to skip one)")
                continue
            device = {field: _value(field, cell, spec.scale) for field, cell in zip(spec.columns, row) if field != "-"}
            if "index" in device and device["index"] is None:
                continue  # a header line
            devices.append(device)
    else:
        for match in re.finditer(spec.pattern, output, re.MULTILINE):
            devices.append({field: _value(field, text, spec.scale)
                            for field, text in match.groupdict().items() if text is not None})
    for position, device in enumerate(devices):
        device.setdefault("index", position)
    if not devices and mismatched:
        raise ColumnsMismatch(mismatched[0] + (f" (and {len(mismatched) - 1} more such line(s))"
                                               if len(mismatched) > 1 else ""))
    if not devices:
        raise ReadingError(f"{spec.command[0]} printed no device reading: {output.strip()[-200:]!r}")
    sample = check({"devices": devices})
    if mismatched:  # the tool's odd line, left out and named; the other lines are read
        sample["refused"] = mismatched + sample.get("refused", [])
    return sample


def _impossible(device: dict) -> dict[str, str]:
    out = {}
    util = device.get("util_percent")
    if isinstance(util, (int, float)) and not 0 <= util <= 100:
        out["util_percent"] = f"utilisation {util:g} % (not within 0-100 %)"
    power = device.get("power_w")
    if isinstance(power, (int, float)) and not 0 <= power <= POWER_BOUND_W:
        out["power_w"] = (f"power {power:,.0f} W (over the {POWER_BOUND_W:,.0f} W bound of any accelerator)"
                          if power > 0 else f"power {power:g} W (negative)")
    used, total = device.get("mem_used_bytes"), device.get("mem_total_bytes")
    if isinstance(used, (int, float)) and (used < 0 or isinstance(total, (int, float)) and 0 < total < used):
        out["mem_used_bytes"] = (f"memory used {used:,.0f} B over the total {total:,.0f} B" if used >= 0
                                 else f"memory used {used:g} B (negative)")
    return out


def check(sample: dict) -> dict:
    """The sample with each impossible field set to None and named under ``refused`` (any sampler's: the
    monitor's loop checks every accelerator sample; the orchestrator warns with the reasons)."""
    refused = []
    for device in sample.get("devices") or []:
        for field, reason in _impossible(device).items():
            device[field] = None
            refused.append(f"device {device.get('index', '?')}: {reason}")
    if refused:
        sample["refused"] = refused
    return sample


def parse_processes(spec: ProcessQuerySpec, output: str) -> dict[int, list]:
    """The processes query's output as ``{device index: [[pid, util %, memory bytes], ...]}``: a line without
    a number for its index or pid (a header, "No running processes found") is no process."""
    found: dict[int, list] = {}
    for row in csv.reader(line for line in output.splitlines() if line.strip()):
        if len(row) != len(spec.columns):
            continue
        fields = {field: _value(field, cell, spec.scale) for field, cell in zip(spec.columns, row) if field != "-"}
        if fields.get("index") is None or fields.get("pid") is None:
            continue
        found.setdefault(int(fields["index"]), []).append(
            [int(fields["pid"]), fields.get("util_percent"), fields.get("mem_used_bytes")])
    return found

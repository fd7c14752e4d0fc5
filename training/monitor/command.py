"""A vendor's smi tool as the accelerator monitor, declared in YAML (``CommandMonitorSpec``): no code.

Each sample runs the command (argv, never a shell) and reads one device per CSV line or per regex
match into the monitor file schema's device fields (``training.contract.DEVICE_FIELDS``). A value
that is not a number (``N/A``, ``-``) is None. ``parse`` is separate from running the tool, so a
tool's recorded output can be tested where its device is absent.
"""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

from training.contract.names import expand_placeholders
from training.contract.spec import CommandMonitorSpec

from training.monitor import ToolKilled, Unavailable

CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _value(field: str, text: str, scale: dict[str, float]):
    text = text.strip()
    if field == "name":
        return text or None
    match = re.search(r"-?\d+(?:\.\d+)?", text)  # "312 W", "45C", "1024MiB": the number, in the tool's unit
    if match is None:
        return None
    number = float(match.group()) * scale.get(field, 1.0)
    return int(number) if field == "index" else number


def parse(spec: CommandMonitorSpec, output: str) -> dict:
    devices = []
    if spec.format == "csv":
        for row in csv.reader(line for line in output.splitlines() if line.strip()):
            if len(row) < len(spec.columns):
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
    if not devices:
        raise Unavailable(f"{spec.command[0]} printed no device reading: {output.strip()[-200:]!r}")
    return {"devices": devices}


class CommandSampler:
    def __init__(self, spec: CommandMonitorSpec):
        self.spec, self.argv = spec, expand_placeholders(spec.command, sys.executable, CODE_ROOT)

    def sample(self) -> dict:
        try:
            done = subprocess.run(self.argv, capture_output=True, text=True, timeout=self.spec.timeout_s,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"{self.argv[0]}: {exc}") from None
        if done.returncode < 0:
            raise ToolKilled(f"{self.argv[0]} was killed by signal {-done.returncode}")
        if done.returncode:
            raise Unavailable(f"{self.argv[0]} exited with {done.returncode}: {done.stderr.strip()[-200:]}")
        return parse(self.spec, done.stdout)


def open(spec: CommandMonitorSpec) -> CommandSampler:  # noqa: A001 - the sampler interface's name
    sampler = CommandSampler(spec)
    sampler.sample()  # fails now, as Unavailable, rather than at every interval
    return sampler

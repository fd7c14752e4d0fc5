"""A vendor's smi tool as the accelerator monitor, declared in YAML (``CommandMonitorSpec``): no code.

Each sample runs the command (argv, never a shell) and reads one device per CSV line or per regex
match into the monitor file schema's device fields (``training.contract.DEVICE_FIELDS``); where the kind
declares a processes query, each device also gets the processes on it (``PROCESS_FIELDS``). A value
that is not a number (``N/A``, ``-``) is None. The parser is the contract's (``readings.parse``), separate
from running the tool, so a tool's recorded output can be tested where its device is absent and
``accelbench vendor check`` reads it the same way.
"""
from __future__ import annotations

import os
import subprocess
import sys

from training.contract import readings
from training.contract.names import expand_placeholders
from training.contract.monitor_spec import CommandMonitorSpec

from training.monitor.sampler import ToolKilled, Unavailable

CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse(spec: CommandMonitorSpec, output: str) -> dict:
    """The tool's output as device readings (training/contract/readings.py: the parser ``vendor check`` uses)."""
    try:
        return readings.parse(spec, output)
    except readings.ReadingError as exc:
        raise Unavailable(str(exc)) from None


class CommandSampler:
    """Runs the tool each interval. An output whose every line has another field count than ``columns`` stops
    the sampler only while no sample has been read yet (wrong columns); after one has, it is a tool's odd
    moment: an empty sample naming why under ``refused`` (one warning for the run), and sampling goes on."""

    def __init__(self, spec: CommandMonitorSpec):
        self.spec, self.argv = spec, expand_placeholders(spec.command, sys.executable, CODE_ROOT)
        self.read_once = False

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
        try:
            sample = readings.parse(self.spec, done.stdout)
        except readings.ColumnsMismatch as exc:
            if not self.read_once:
                raise Unavailable(str(exc)) from None
            return {"devices": [], "refused": [str(exc)]}
        except readings.ReadingError as exc:
            raise Unavailable(str(exc)) from None
        self.read_once = True
        if self.spec.processes is not None:
            self._add_processes(sample)
        return sample

    def _add_processes(self, sample: dict) -> None:
        """Each device's ``processes`` from the processes query; None on every device where it fails (the
        readings stand without them)."""
        query = self.spec.processes
        try:
            done = subprocess.run(expand_placeholders(query.command, sys.executable, CODE_ROOT), capture_output=True,
                                  text=True, timeout=query.timeout_s, stdin=subprocess.DEVNULL)
            found = readings.parse_processes(query, done.stdout) if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            found = None
        for device in sample.get("devices") or []:
            device["processes"] = None if found is None else found.get(device.get("index"), [])


def open(spec: CommandMonitorSpec) -> CommandSampler:  # noqa: A001 - the sampler interface's name
    sampler = CommandSampler(spec)
    sampler.sample()  # fails now, as Unavailable, rather than at every interval
    return sampler

"""The accelerator monitor a kind declares: a built-in sampler's name, or a vendor's smi tool in YAML
(``CommandMonitorSpec``) with, optionally, a second command that lists the compute processes on each device
(``ProcessQuerySpec``), which tells the run's own processes from another job's on the run's devices.
Re-exported by spec.py, where the worker config names it."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, PositiveFloat, model_validator

from training.contract.monitors import MonitorName  # noqa: F401 - the monitor list, declared there once
from training.contract.names import DEVICE_FIELDS, PROCESS_FIELDS
from training.contract.spec_base import StrictModel



class CommandMonitorSpec(StrictModel):
    """A vendor's smi tool as the accelerator monitor, declared in YAML: run ``command`` every interval and
    read one reading per device from its output. ``{python}`` and ``{code_root}`` in the command are the
    node's interpreter and the folder holding ``training/`` (and the vendors' code) on the node."""

    command: tuple[str, ...] = Field(min_length=1, description="argv, never a shell line")
    format: Literal["csv", "regex"] = Field(description="csv: one line per device, fields in `columns` order; "
                                                        "regex: every match of `pattern` is one device")
    columns: tuple[str, ...] = Field((), description=f"csv: the field of each column ({', '.join(DEVICE_FIELDS)}), "
                                                     "'-' for a column to skip")
    pattern: Optional[str] = Field(None, description="regex: named groups are fields, e.g. (?P<power_w>[0-9.]+)")
    scale: dict[str, float] = Field(default_factory=dict, description="multiply a field, e.g. "
                                                                      "{mem_used_bytes: 1048576} for MiB")
    timeout_s: PositiveFloat = 10.0
    processes: Optional["ProcessQuerySpec"] = Field(None, description="a command that lists the compute processes "
                                                                       "on each device (nvidia-smi's "
                                                                       "--query-compute-apps)")

    @model_validator(mode="after")
    def _fields_known(self) -> "CommandMonitorSpec":
        import re

        if self.format == "csv" and not self.columns:
            raise ValueError("format csv needs columns: the device field of each column, in order")
        if self.format == "regex":
            if not self.pattern:
                raise ValueError("format regex needs pattern, with named groups for the fields")
            try:
                named = set(re.compile(self.pattern).groupindex)
            except re.error as exc:
                raise ValueError(f"pattern is not a regular expression: {exc}") from None
        else:
            named = {c for c in self.columns if c != "-"}
        unknown = sorted((named | set(self.scale)) - set(DEVICE_FIELDS))
        if unknown:
            raise ValueError(f"unknown device field(s) {', '.join(unknown)}; known: {', '.join(DEVICE_FIELDS)}")
        return self


class ProcessQuerySpec(StrictModel):
    """One CSV line per process on a device, fields in ``columns`` order (``index`` and ``pid`` needed); a
    header line or a message ("No running processes found") is no process."""

    command: tuple[str, ...] = Field(min_length=1, description="argv, never a shell line")
    columns: tuple[str, ...] = Field(description=f"the field of each column ({', '.join(PROCESS_FIELDS)}), "
                                                 "'-' for a column to skip")
    scale: dict[str, float] = Field(default_factory=dict, description="multiply a field, e.g. "
                                                                      "{mem_used_bytes: 1048576} for MiB")
    timeout_s: PositiveFloat = 10.0

    @model_validator(mode="after")
    def _fields_known(self) -> "ProcessQuerySpec":
        named = {c for c in self.columns if c != "-"}
        unknown = sorted((named | set(self.scale)) - set(PROCESS_FIELDS))
        if unknown:
            raise ValueError(f"unknown process field(s) {', '.join(unknown)}; known: {', '.join(PROCESS_FIELDS)}")
        if not {"index", "pid"} <= named:
            raise ValueError("columns must name index (the device) and pid")
        return self


CommandMonitorSpec.model_rebuild()

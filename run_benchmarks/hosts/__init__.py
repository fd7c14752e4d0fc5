"""Hosts: one interface (start, run, put, get, close) over each way of reaching a machine."""
from __future__ import annotations

from ..config import HostSpec
from .base import Host, Job
from .local import LocalHost


def connect(spec: HostSpec) -> Host:
    if spec.backend == "local":
        return LocalHost(spec)
    if spec.backend == "ssh":
        from .ssh import SshHost  # paramiko is needed only for remote hosts

        return SshHost(spec)
    raise ValueError(f"no host backend {spec.backend!r}")  # unreachable: the schema allows only known ones


__all__ = ["Host", "Job", "LocalHost", "connect"]

"""Hosts: one interface (start, run, put, get, staging, close) over each way of reaching a machine.

Backends register in ``BACKENDS`` by path under the name ``HostSpec.backend`` gives; ``connect`` picks one.
Only the backend a host names is imported (paramiko only for SSH hosts).
"""
from __future__ import annotations

from typing import Callable

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.registry import Registry
from run_benchmarks.backends.hosts.base import Host, Job

BACKENDS: Registry[Callable[[HostSpec], Host]] = Registry("host backend")
BACKENDS.register("local", f"{__name__}.local:LocalHost")
BACKENDS.register("ssh", f"{__name__}.ssh:SshHost")


def connect(spec: HostSpec) -> Host:
    return BACKENDS.get(spec.backend)(spec)


__all__ = ["BACKENDS", "Host", "Job", "connect"]

"""Hosts: one interface (start, run, put, get, staging, close) over each way of reaching a machine.

Backends register in ``BACKENDS`` under the name ``HostSpec.backend`` gives; ``connect`` picks one.
"""
from __future__ import annotations

from typing import Callable

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.registry import Registry
from run_benchmarks.backends.hosts.base import Host, Job
from run_benchmarks.backends.hosts.local import LocalHost

BACKENDS: Registry[Callable[[HostSpec], Host]] = Registry("host backend")
BACKENDS.register("local", LocalHost)


@BACKENDS.register("ssh")
def _ssh(spec: HostSpec) -> Host:
    from run_benchmarks.backends.hosts.ssh import SshHost  # paramiko is needed only for remote hosts

    return SshHost(spec)


def connect(spec: HostSpec) -> Host:
    return BACKENDS.get(spec.backend)(spec)


__all__ = ["BACKENDS", "Host", "Job", "LocalHost", "connect"]

"""One core of this machine for a test's own processes, ahead of everything else that runs on it.

The suite's three lanes share 2 cores (tests/lanes.py), so no run of the suite is ever alone: a test that must
show a quiet round and a contended one (tests/test_contention_runs.py) first takes a core for itself, as a
benchmark's owner would. Its processes get that core's affinity and a CPU cgroup whose weight is the largest
the kernel takes (cgroup v1 ``cpu.shares``, or v2 ``cpu.weight``), so the other lanes' work moves to the
other core or waits while they run; on the other core the lanes go on. Everything started with ``preexec``
inherits both (launchers' new sessions included: autogroups only apply outside a cgroup). Needs root and a CPU
cgroup controller; elsewhere the test says so as a skip.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import pytest

V1 = Path("/sys/fs/cgroup/cpu")
V1_SHARES = 262144  # the most cpu.shares takes (1024 is a nice-0 task's)
V2_WEIGHT = 10000  # the most cpu.weight takes (100 is the default)


def _v2_root() -> Optional[Path]:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            root = Path(fields[1])
            if "cpu" in (root / "cgroup.controllers").read_text().split():
                return root
    return None


class OwnCore:
    """``with OwnCore() as core``: ``core.preexec`` for every Popen of the test; ``core.cpu``: its core."""

    def __init__(self) -> None:
        self.cpu = max(os.sched_getaffinity(0))
        self.group: Optional[Path] = None
        self.weight_file = ""

    def __enter__(self) -> "OwnCore":
        if os.geteuid() != 0:
            pytest.skip("needs root: the test takes a core ahead of the suite's other lanes (a CPU cgroup)")
        name = f"accelbench-test-{os.getpid()}-{time.monotonic_ns()}"
        if (V1 / "cpu.shares").is_file():
            self.group, self.weight_file, weight = V1 / name, "cpu.shares", V1_SHARES
        else:
            root = _v2_root()
            if root is None:
                pytest.skip("needs root and a CPU cgroup controller (v1 cpu or v2 with cpu enabled)")
            (root / "cgroup.subtree_control").write_text("+cpu")
            self.group, self.weight_file, weight = root / name, "cpu.weight", V2_WEIGHT
        self.group.mkdir()
        (self.group / self.weight_file).write_text(str(weight))
        return self

    def preexec(self) -> None:
        """In the child, before it runs anything: this core and this cgroup, for it and all it starts."""
        os.sched_setaffinity(0, {self.cpu})
        with open(self.group / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def __exit__(self, *exc) -> None:
        deadline = time.monotonic() + 30
        while self.group is not None and self.group.exists():
            try:
                self.group.rmdir()  # empty once every process of the test has ended
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

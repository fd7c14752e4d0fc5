"""Environment probes: a vendor's command per field, run once per host before the first round.

Each command is split like a shell would split it but never run by one (argv only), so a probe
cannot expand variables or chain commands. A probe that fails says so in its field; it never stops
a run, since a missing ``nvidia-smi`` must not cost the figures.
"""
from __future__ import annotations

import shlex
import socket
import subprocess
from typing import Mapping, Optional

from run_benchmarks.backends.hosts import Host

MAX_CHARS = 2000  # a probe is a fact, not a log; topology matrices fit
TIMEOUT_S = 15.0


def run_probes(host: Host, probes: Mapping[str, str], vendor_dir: Optional[str] = None) -> dict[str, str]:
    """Each probe's answer on ``host``; ``{vendor_dir}`` in a command is the vendor's folder there."""
    out = {}
    for field, command in probes.items():
        try:
            argv = [word.replace("{vendor_dir}", vendor_dir) if vendor_dir else word for word in shlex.split(command)]
            result = host.run(argv, TIMEOUT_S)
        except (OSError, ValueError, subprocess.TimeoutExpired, socket.timeout) as exc:
            out[field] = f"unavailable: {type(exc).__name__}: {exc}"[:MAX_CHARS]
            continue
        if result.returncode == 0:
            out[field] = result.stdout.strip()[:MAX_CHARS]
        else:
            why = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
            out[field] = f"unavailable: exit {result.returncode}: {why[0][:200]}"
    return out

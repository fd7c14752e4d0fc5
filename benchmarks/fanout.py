#!/usr/bin/env python3
"""Do host operations fan out? Preflight (connect: TCP, SSH handshake, host-key check, key auth) and a
no-op command across 1, 2, 4 and 8 SSH hosts, with accelbench's own parallel host code.

The hosts are real sshd daemons on 127.0.0.2 ... 127.0.0.9 (tests/infra/sshd.py); each count is timed
``--repeats`` times and the median kept. Goal: time(8 hosts) / time(1 host) <= 1.5.

    python benchmarks/fanout.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from run_benchmarks.catalog.config_files import HostSpec  # noqa: E402
from run_benchmarks.backends.hosts import connect  # noqa: E402
from run_benchmarks.backends.fanout import fan_out  # noqa: E402
from tests.infra.sshd import start_sshd_cluster  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return s.getsockname()[1]


def preflight_and_noop(specs: list[HostSpec], sequential: bool = False) -> float:
    started = time.perf_counter()
    if sequential:  # the baseline fan-out is compared with: one host after another
        hosts = [connect(spec) for spec in specs]
        results, errors = [host.run(["true"]) for host in hosts], []
    else:
        hosts, errors = fan_out(connect, specs)
        if errors:
            raise errors[0]
        results, errors = fan_out(lambda host: host.run(["true"]), hosts)
    elapsed = time.perf_counter() - started
    if errors or any(r.returncode for r in results):
        raise RuntimeError(f"no-op failed: {errors or results}")
    for host in hosts:
        host.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_sshd_cluster(Path(tmp), count=8, port=free_port())
        try:
            specs = [HostSpec(name=h.name, backend="ssh", address=h.address, port=h.port, user=cluster.user,
                              identity_file=str(cluster.client_key), known_hosts=str(cluster.known_hosts))
                     for h in cluster.hosts]
            preflight_and_noop(specs)  # warm: first handshakes pay for key loading and page cache
            medians = {}
            for count in (1, 2, 4, 8):
                times = [preflight_and_noop(specs[:count]) for _ in range(args.repeats)]
                medians[count] = statistics.median(times)
                print(f"{count} host(s): median {medians[count] * 1e3:.0f} ms "
                      f"(min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f}, n={len(times)})")
            serial = statistics.median(preflight_and_noop(specs, sequential=True) for _ in range(args.repeats))
            print(f"8 host(s) one after another: median {serial * 1e3:.0f} ms")
        finally:
            cluster.stop()
    ratio = medians[8] / medians[1]
    print(f"ratio 8 hosts / 1 host: {ratio:.2f} (goal <= 1.5); 8 in parallel / 8 in sequence: "
          f"{medians[8] / serial:.2f}; {os.cpu_count()} CPU cores shared by the client and all 8 sshd hosts")


if __name__ == "__main__":
    main()

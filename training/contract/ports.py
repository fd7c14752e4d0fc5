"""The rendezvous port of a round with ``master_port: auto``: chosen on the master host when the round starts
there, never by the planner on the orchestrator's machine (whose free ports say nothing of an SSH, Slurm or
Kubernetes node's). The plan carries ``PLACEHOLDER`` where the port goes; whatever starts the round on the
master fills it in: the host list's scheduler runs this file on the master host (``python ports.py``, an argv
list over SSH), Slurm's batch script runs it on the job's first node, and a Kubernetes pod of index 0 runs it
with ``--publish`` before its launcher (the other pods ``--wait`` for the port it wrote in the shared folder).

A port is picked below the kernel's ephemeral range: a port the kernel hands out for ``bind(0)`` comes from the
range it draws from for every outgoing connection, so a client socket may take it before the launcher's store
listens (EADDRINUSE). Ports below the range are never given to clients; a port free when the round starts
stays free unless something listens on it on purpose. Standard library only, any Python 3.8+, runnable as a
file (``python training/contract/ports.py``) on a host that has nothing else of accelbench's.
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import time
from pathlib import Path

PLACEHOLDER = "@ACCELBENCH_MASTER_PORT@"  # in a planned argv: the port chosen when the round starts
PORT_FILE = "master_port"  # in a round's folder: the port its master chose, recorded with the round
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default, used where the file cannot be read
LOWEST = 10_000  # below this live well-known and registered services
WAIT_POLL_S = 0.5


def ephemeral_range(path: Path = _RANGE_FILE) -> tuple[int, int]:
    try:
        low, high = (int(v) for v in path.read_text().split())
        return (low, high) if 0 < low <= high <= 65535 else _DEFAULT_EPHEMERAL
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL


def candidate_ports(ephemeral: tuple[int, int]) -> range:
    """The wider of the two stretches outside the ephemeral range (and above LOWEST)."""
    low, high = ephemeral
    below = range(LOWEST, max(LOWEST, low))
    above = range(min(65536, high + 1), 65536)
    return below if len(below) >= len(above) else above


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """``count`` distinct ports that nothing listens on now, outside the ephemeral range."""
    found = []
    for port in _random_order(list(candidate_ports(ephemeral_range())), rng or random.SystemRandom()):
        if len(found) == count:
            break
        if bindable(port):
            found.append(port)
    if len(found) < count:
        raise RuntimeError(f"only {len(found)} of {count} rendezvous ports are free outside the ephemeral range")
    return found


def _random_order(items: list[int], rng: random.Random):
    """``items`` in a uniformly random order, drawn as they are taken (Fisher-Yates, lazily): a round takes
    one port of ~22,000, and shuffling them all would cost ~0.1 s."""
    for i in range(len(items)):
        j = rng.randrange(i, len(items))
        items[i], items[j] = items[j], items[i]
        yield items[i]


def filled(argv, port: int) -> list[str]:
    """``argv`` with the chosen port where the plan left ``PLACEHOLDER``."""
    return [str(word).replace(PLACEHOLDER, str(port)) for word in argv]


def read_port(text: str) -> int | None:
    """The port a master wrote (``PORT_FILE``, or this file's output), or None when it is no port."""
    word = text.strip()
    return int(word) if word.isdigit() and 0 < int(word) < 65536 else None


def publish(path: Path) -> int:
    """Choose a port here and write it to ``path`` whole (a temporary file renamed over it)."""
    port = free_ports(1)[0]
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(f"{port}\n")
    os.replace(partial, path)
    return port


def wait_for(path: Path, timeout_s: float) -> int:
    """The port the master published at ``path``, waiting for it up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            port = read_port(path.read_text())
        except OSError:
            port = None
        if port is not None:
            return port
        if time.monotonic() > deadline:
            raise SystemExit(f"accelbench: no master port in {path} after {timeout_s:g} s (node 0 did not start)")
        time.sleep(WAIT_POLL_S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Choose a free rendezvous port on this host and print it; "
                                                 "or, with a command after --, run it with the port filled in.")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--publish", type=Path, help="choose the port here and write it to this file")
    side.add_argument("--wait", type=Path, help="read the port another node wrote to this file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds --wait waits for the file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- ARGV: run with the port in place of "
                                                                  f"{PLACEHOLDER}")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.publish is not None:
        port = publish(args.publish)
    elif args.wait is not None:
        port = wait_for(args.wait, args.timeout)
    else:
        port = free_ports(1)[0]
    if not command:
        print(port, flush=True)
        return
    sys.stdout.flush()
    os.execvp(command[0], filled(command, port))  # every word one argument: no shell


if __name__ == "__main__":
    main()

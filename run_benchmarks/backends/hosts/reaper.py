"""The reaper: the one script that finds the processes accelbench started on a host and ends them.

Every process a job starts carries ``ACCELBENCH_JOB_TAG`` (and ``ACCELBENCH_RUN_ID``, ``ACCELBENCH_ORCHESTRATOR``
= ``host:pid:start``) in its environment; the reaper reads them from /proc, so it reaches workers that left
their launcher's process group or were re-parented. It is standard-library Python run with ``python -c``,
the same text locally and over SSH (a host needs nothing installed), in one of three modes:

- ``guard TAG GRACE CLEANUP_JSON [ARGV...]``: the parent-death guard (hosts/guard.py). It waits for the end of
  its stdin, which only the orchestrator holds open; then, unless a ``d`` came first (the orchestrator ended
  the job itself), it ends every process of the tag and runs the cleanup command (``docker rm -f`` of a
  node's container). With ARGV it runs that command as its child and exits with its code.
- ``stop TAG GRACE``: ends every process of the tag now (``Host.stop`` over SSH).
- ``scan [--kill]``: lists accelbench's processes with their owner and whether that owner still runs; with
  ``--kill`` ends those whose orchestrator is dead on this machine (``accelbench clean``, backends/cleanup.py).

Ending is always the same: TERM, up to GRACE seconds for them to go, then KILL and up to 5 s more. It is the
one way accelbench ends processes on a host: a local job's stop (hosts/local.py: ``stop_here``), a stop over
SSH, a parent-death guard, ``accelbench clean``, and a vendor tool past its timeout (cli/vendor_probe.py).
A second signal while a stop waits (``signals.hurried``) starts another with no grace beside it
(``watched_stop``), which kills what is left at once.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Callable, Sequence

from run_benchmarks import signals

KILL_WAIT_S = 5.0  # after KILL: how long the script waits for the processes to be gone

SCRIPT = r"""
import json, os, signal, socket, subprocess, sys, threading, time
KEYS = (b"ACCELBENCH_JOB_TAG", b"ACCELBENCH_RUN_ID", b"ACCELBENCH_ORCHESTRATOR")
MARKERS = ("training.run_pretraining", "training.monitor")  # an older accelbench's untagged processes
SKIP = {os.getpid(), os.getppid()}
def ticks(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().decode(errors="replace").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
def accelbench_env(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        items = f.read().split(b"\0")
    env = {}
    for item in items:
        key, _, value = item.partition(b"=")
        if key in KEYS:
            env[key.decode()] = value.decode(errors="replace")
    return env
def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in SKIP]
def tagged(tag):
    found = []
    for pid in pids():
        try:
            if accelbench_env(pid).get("ACCELBENCH_JOB_TAG") == tag:
                found.append(pid)
        except OSError:
            pass
    return found
def end(find, grace):
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        left = find()
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = find()
        if not left:
            return
def scan(kill):
    machine, found = socket.gethostname(), []
    for pid in pids():
        try:
            env = accelbench_env(pid)
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if "ACCELBENCH_JOB_TAG" not in env and not any(m in cmd for m in MARKERS):
            continue
        owner, alive = env.get("ACCELBENCH_ORCHESTRATOR", ""), None
        if owner.count(":") >= 2:
            host, opid, start = owner.rsplit(":", 2)
            if host == machine and opid.isdigit():
                alive = ticks(int(opid)) == start if start else ticks(int(opid)) is not None
        found.append({"pid": pid, "run": env.get("ACCELBENCH_RUN_ID", ""), "owner": owner, "alive": alive,
                      "cmd": cmd[:200]})
    if kill:
        dead = [p["pid"] for p in found if p["alive"] is False]
        end(lambda: [pid for pid in dead if ticks(pid)], 3.0)
    print(json.dumps({"machine": machine, "processes": found}))
def guard(tag, grace, cleanup, argv):
    SKIP.discard(os.getppid())  # the guard's parent is the orchestrator or sshd, never tagged
    for s in (signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)  # only the end of stdin decides
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL) if argv else None
    def watch():
        disarmed = False
        while True:
            try:
                data = os.read(0, 4096)
            except OSError:
                data = b""
            if not data:
                break
            disarmed = disarmed or b"d" in data
        if not disarmed:
            end(lambda: tagged(tag), grace)
            if cleanup:
                try:
                    subprocess.run(cleanup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=60)
                except Exception:
                    pass
        os._exit(0 if child is None else 143)
    if child is None:
        watch()
    threading.Thread(target=watch, daemon=True).start()
    code = child.wait()
    os._exit(code if code >= 0 else 128 - code)
mode = sys.argv[1]
if mode == "guard":
    guard(sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5:])
elif mode == "stop":
    end(lambda: tagged(sys.argv[2]), float(sys.argv[3]))
elif mode == "scan":
    scan("--kill" in sys.argv[2:])
else:
    sys.exit("reaper: unknown mode %r" % mode)
"""


def guard_argv(python: str, tag: str, grace_s: float, cleanup: Sequence[str] = (),
               argv: Sequence[str] = ()) -> list[str]:
    return [python, "-c", SCRIPT, "guard", tag, f"{grace_s:g}", json.dumps(list(cleanup)), *argv]


def stop_argv(python: str, tag: str, grace_s: float) -> list[str]:
    return [python, "-c", SCRIPT, "stop", tag, f"{grace_s:g}"]


def scan_argv(python: str, kill: bool = False) -> list[str]:
    return [python, "-c", SCRIPT, "scan", *(["--kill"] if kill else [])]


def watched_stop(start: Callable[[float], Callable[[], bool]], grace_s: float, slack_s: float = 30.0) -> None:
    """A stop with ``grace_s`` (``start(grace)`` begins the reaper's stop of that grace and returns whether it has
    ended), waited for here up to its grace and ``slack_s`` more; a second signal while it waits (the person
    wants the run over) begins a stop with no grace beside it, which kills what is left at once."""
    ended = [start(grace_s)]
    hurried = grace_s <= 0
    deadline = time.monotonic() + grace_s + KILL_WAIT_S + slack_s
    while not all(done() for done in ended) and time.monotonic() < deadline:
        if not hurried and signals.hurried():
            hurried = True
            ended.append(start(0.0))
        time.sleep(0.05)


def stop_here(tag: str, grace_s: float) -> None:
    """The reaper's stop of ``tag`` on this machine (``watched_stop``). Each stop runs in a session of its own,
    so the terminal's Ctrl-C that asks for the stop does not end the stop itself."""
    started: list[subprocess.Popen] = []

    def start(grace: float) -> Callable[[], bool]:
        process = subprocess.Popen(stop_argv(sys.executable, tag, grace), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                   close_fds=True)
        started.append(process)
        return lambda: process.poll() is not None

    try:
        watched_stop(start, grace_s)
    finally:
        for process in started:  # past the deadline (never, unless /proc hangs): not left behind
            if process.poll() is None:
                process.kill()
                process.wait()

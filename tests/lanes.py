"""Run the whole suite as its three lanes side by side (``./dev test`` with no arguments, which CI runs).

One pytest process leaves most of this machine idle: the suite mostly waits on launchers, sshd, Docker, Slurm
and deadlines (a serial run used 0.66 cores of 2). tests/conftest.py splits the tests into lanes so that each
session fixture (golden runs, test hosts) is built in one lane only; the lanes are separate pytest processes
with their own base temp folders. Each lane's output goes to a log; a progress line is printed every minute,
then the logs (whole for a lane that failed, the summary otherwise) and the slowest tests of all lanes.
Ctrl-C or SIGTERM ends every lane (pytest gets SIGINT, then SIGKILL after a grace period): nothing keeps running.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANES = ("local", "infra", "inprocess")  # the longest first
PROGRESS_EVERY_S = 60
GRACE_S = 60
SLOWEST = 25


def say(text: str) -> None:
    print(f"\033[1m[lanes]\033[0m {text}", file=sys.stderr, flush=True)


def start(lane: str, work: Path, extra: list[str]) -> subprocess.Popen:
    log = open(work / f"{lane}.log", "wb")
    argv = [sys.executable, "-m", "pytest", "--lane", lane, "-p", "no:cacheprovider", "--basetemp",
            str(work / f"{lane}-tmp"), "--junitxml", str(work / f"{lane}.xml"), *extra]
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=lane_environment())


def lane_environment() -> dict:
    """One intra-op thread per process (unless the caller chose): three lanes share this machine's cores, and
    a one-process torch run would otherwise start a thread per core whose OpenMP workers spin while they wait,
    taking CPU the other lanes' ranks need (torchrun sets the same for its multi-process runs; Paddle's ranks
    choose their own share, training/paddle/process.py). Inductor compiles in the compiling process too
    (TORCHINDUCTOR_COMPILE_THREADS=1): its pool of compile workers would import torch again in each, for
    kernels this small; the compiled code is the same. Figures of a test run are not benchmark figures.
    Python caches the bytecode of what it imports (PYTHONDONTWRITEBYTECODE unset): ./dev setup leaves all but
    what every run imports to be compiled at first use, which without caching would be at every use."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**environment, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1")}


def progress(work: Path, lane: str) -> str:
    text = (work / f"{lane}.log").read_text(errors="replace")
    done = re.findall(r"\[\s*(\d+)%\]", text)
    return f"{done[-1]}%" if done else "collecting"


def summary(text: str) -> str:
    """The lane's slowest tests and its result lines (pytest's tail from the durations header on)."""
    cut = text.find("slowest ")
    start_at = text.rfind("\n=", 0, cut) if cut >= 0 else -1
    return text[start_at + 1:] if start_at >= 0 else "\n".join(text.splitlines()[-30:])


def slowest(work: Path) -> list[str]:
    times = []
    for lane in LANES:
        try:
            tree = ET.parse(work / f"{lane}.xml")
        except (OSError, ET.ParseError):
            continue
        for case in tree.iter("testcase"):
            times.append((float(case.get("time", 0)), lane, f"{case.get('classname')}::{case.get('name')}"))
    return [f"{t:8.2f}s  {lane:9s} {name}" for t, lane, name in sorted(times, reverse=True)[:SLOWEST]]


def stop(procs: dict[str, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
    deadline = time.monotonic() + GRACE_S
    for proc in procs.values():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main(extra: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="accelbench-lanes-"))
    began = time.monotonic()
    procs = {lane: start(lane, work, extra) for lane in LANES}
    say(f"{len(LANES)} lanes side by side ({', '.join(LANES)}); logs in {work}")

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupted)
    ended: dict[str, float] = {}
    next_progress = PROGRESS_EVERY_S
    try:
        while len(ended) < len(procs):
            for lane, proc in procs.items():
                if lane not in ended and proc.poll() is not None:
                    ended[lane] = time.monotonic() - began
                    say(f"{lane} ended (exit {proc.returncode}) after {ended[lane]:.0f} s")
            if len(ended) < len(procs):
                time.sleep(1)
                elapsed = time.monotonic() - began
                if elapsed >= next_progress:
                    next_progress += PROGRESS_EVERY_S
                    say(f"{elapsed / 60:.0f} min: " + ", ".join(
                        f"{lane} {'done' if lane in ended else progress(work, lane)}" for lane in LANES))
    except KeyboardInterrupt as why:
        say(f"{why or 'SIGINT'}: ending every lane")
        stop(procs)
        return 130
    codes = {lane: proc.returncode for lane, proc in procs.items()}
    for lane in LANES:
        text = (work / f"{lane}.log").read_text(errors="replace")
        print(f"\n{'#' * 30} lane {lane}: exit {codes[lane]}, {ended[lane]:.0f} s {'#' * 30}")
        print(text if codes[lane] else summary(text))
    print(f"\n{'#' * 30} the {SLOWEST} slowest tests of all lanes {'#' * 30}")
    print("\n".join(slowest(work)))
    failed = [lane for lane, code in codes.items() if code]
    total = time.monotonic() - began
    if failed:
        say(f"failed lanes: {', '.join(failed)}; their folders are kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    say(f"all lanes: {'FAILED' if failed else 'passed'} in {total:.0f} s")
    return max(codes.values()) if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""How long after each kind of kill the last process (and container) of a run is gone.

For each target (local: a 1x2 run on this machine; ssh: a 2x1 run on two sshd hosts on 127.0.0.x;
container: the same with nodes in containers on a Docker engine) and each signal (TERM, HUP, INT+INT,
KILL), start ``accelbench run`` with a long training, wait for the first step record, send the signal,
and time until nothing of the run is left: no process marked with the orchestrator's identity or naming
the run's folders, no container of the run. Goals: under 5 s locally, under 10 s over SSH and in
containers.

    python benchmarks/cleanup.py [--targets local,ssh,container] [--signals TERM,HUP,INT2,KILL] [--repeat N]

Prints one line per trial and a Markdown table (median and max per target and signal).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.signal_faults import (LONG, run_containers, run_processes, seconds_until_gone, start,  # noqa: E402
                                 wait_for_step)

SIGNALS = {"TERM": [signal.SIGTERM], "HUP": [signal.SIGHUP], "INT2": [signal.SIGINT, signal.SIGINT],
           "KILL": [signal.SIGKILL]}
GOAL_S = {"local": 5.0, "ssh": 10.0, "container": 10.0}


def trial(target: str, name: str, workdir: Path, sshd=None, engine=None) -> tuple[float, float, list[str]]:
    """(seconds until the run's last node process or container is gone, seconds until the orchestrator
    exited (results written), what was still there after 120 s)."""
    work = workdir / "hosts-work"
    args = list(LONG)
    case = "gpt2_tiny:torch:cpu:1:2"
    if target != "local":
        extra = {"python": sys.executable} if target == "ssh" else {"runtime": "container",
                                                                    "docker_host": engine.docker_host}
        cluster = workdir / "cluster.yaml"
        cluster.write_text(sshd.cluster_yaml(work_root=str(work), **extra))
        args += ["--cluster", str(cluster)]
        case = "gpt2_tiny:torch:cpu:2:1" if target == "ssh" else "gpt2_tiny:torch_2.13:cpu:2:1"
    orch = start(workdir, case, *args)
    wait_for_step(orch, [work, orch.log_root], timeout=600)
    run_id = orch.run_id()

    def left() -> list[str]:
        found = run_processes(orch.pid, [work, orch.log_root])
        if engine is not None:
            found += run_containers(engine.docker_host, run_id)
        return found

    began = time.monotonic()
    for i, sig in enumerate(SIGNALS[name]):
        if i:
            time.sleep(0.3)
        os.kill(orch.pid, sig)
    took, remaining = seconds_until_gone(left, 120)
    orch.wait(timeout=120)
    return took, time.monotonic() - began, remaining


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="local,ssh,container")
    parser.add_argument("--signals", default="TERM,HUP,INT2,KILL")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    targets, names = args.targets.split(","), args.signals.split(",")
    sshd = engine = None
    root = Path(tempfile.mkdtemp(prefix="accelbench-cleanup-bench-"))
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        if any(t != "local" for t in targets):
            from tests.infra.sshd import start_sshd_cluster

            with socket.socket() as s:
                s.bind(("127.0.0.2", 0))
                port = s.getsockname()[1]
            sshd = start_sshd_cluster(root / "sshd", count=2, port=port)
        if "container" in targets:
            from tests.infra.docker_engine import ensure_base_image, start_engine

            engine = start_engine()
            ensure_base_image(engine.docker_host)
        for target in targets:
            for name in names:
                for k in range(args.repeat):
                    workdir = root / f"{target}-{name}-{k}"
                    workdir.mkdir(parents=True)
                    took, exited, remaining = trial(target, name, workdir, sshd,
                                                    engine if target == "container" else None)
                    results.setdefault((target, name), []).append((took, exited))
                    verdict = "ok" if not remaining and took <= GOAL_S[target] else f"OVER (left: {remaining})"
                    print(f"{target:9} {name:5} #{k + 1}: last node process gone after {took:5.2f} s, "
                          f"orchestrator exited after {exited:5.2f} s  {verdict}", flush=True)
    finally:
        if sshd is not None:
            sshd.stop()
        if engine is not None:
            engine.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}\n")
    print("| target | signal | trials | last node process gone: median (max) s | orchestrator exited: median s "
          "| goal s |\n| --- | --- | --- | --- | --- | --- |")
    for (target, name), values in results.items():
        gone, exited = [v[0] for v in values], [v[1] for v in values]
        print(f"| {target} | {name} | {len(values)} | {statistics.median(gone):.2f} ({max(gone):.2f}) | "
              f"{statistics.median(exited):.2f} | {GOAL_S[target]:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``run --require-quiet``: before each round, wait up to a deadline for its hosts to be quiet, or refuse.

Quiet means within every CPU limit of ``contention:`` (others' CPU share of the cores, steal, memory pressure,
load per core; catalog/contention_limits.py) over a probe of ``PROBE_S`` seconds on each of the round's hosts
(``python -m training.monitor.quiet``, the node monitor's own counters). The probes repeat until every host is
quiet or the deadline passes; then the round starts, or the run stops with the last figures (exit 7). Other
processes on the devices are judged over the measured steps only (no device monitor runs between rounds), and
so are hosts a scheduler assigns only when the round starts (Slurm, Kubernetes). The round's own figures over
its measured steps still decide whether it is judged: the machine may change after the wait.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Callable

from run_benchmarks.backends.fanout import fan_out
from run_benchmarks.backends.hosts import Host
from run_benchmarks.backends.hosts.guard import orchestrator_tag
from run_benchmarks.execute.contention import figures_between
from run_benchmarks.plan import CasePlan, RoundPlan
from run_benchmarks.results.figures.contention import reasons

PROBE_S = 2.0
PROBE_MODULE = "training.monitor.quiet"


class NotQuiet(RuntimeError):
    """The hosts were not quiet within the deadline: the message has the last figures."""


def probe(host: Host, python: str, code_root: str) -> dict:
    """One probe's figures on a host (figures_between), or ``{"measured": False, "why": ...}``."""
    argv = ["env", f"PYTHONPATH={code_root}", python, "-m", PROBE_MODULE, "--seconds", f"{PROBE_S:g}",
            "--orchestrator", orchestrator_tag()]
    try:
        done = host.run(argv, timeout_s=PROBE_S + 30)
        first, last = json.loads(done.stdout)
    except (OSError, ValueError, TypeError) as exc:
        return {"measured": False, "why": f"the quiet probe failed: {exc}"}
    return figures_between(first, last, [first["contention"], last["contention"]], "probe", own_needed=False)


def wait_for_quiet(hosts: dict[str, Host], case: CasePlan, rnd: RoundPlan, deadline_s: float,
                   say: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
    """Return once every host of the round is quiet; raise NotQuiet with the figures when the deadline passes."""
    limits = case.contention.model_copy(update={"device_processes": None})
    nodes = {node.host.name: node for node in rnd.nodes if node.host.name in hosts}
    if len(nodes) < len({node.host.name for node in rnd.nodes}):  # a scheduler's nodes: known once it starts them
        say(f"{case.name} round {rnd.index}: --require-quiet probes only the hosts reached before the round "
            f"({', '.join(nodes) or 'none'}); its measured steps judge the others")
        if not nodes:
            return
    local = {name: (sys.executable if hosts[name].spec.backend == "local" else "python3") for name in nodes}
    ends, waited = clock() + deadline_s, False
    while True:
        found, _ = fan_out(lambda name: probe(hosts[name], local[name], nodes[name].env.get("PYTHONPATH", ".")),
                           list(nodes))
        loud = [f"{name}: {line}" if len(nodes) > 1 else line
                for name, figures in zip(nodes, found) if figures.get("measured") for line in reasons(figures, limits)]
        failed = [f"{name}: {figures['why']}" for name, figures in zip(nodes, found) if not figures.get("measured")]
        if failed:
            raise NotQuiet(f"--require-quiet: could not measure {'; '.join(failed)}")
        if not loud:
            if waited:
                say(f"{case.name} round {rnd.index}: quiet now; starting")
            return
        left = ends - clock()
        if left <= 0:
            raise NotQuiet(f"--require-quiet: {case.name} round {rnd.index} refused: not quiet within "
                           f"{deadline_s:g} s: {'; '.join(loud)}")
        say(f"{case.name} round {rnd.index}: waiting for quiet ({left:.0f} s left): {'; '.join(loud)}")
        waited = True

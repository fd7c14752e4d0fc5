"""What else a node's CPUs did beside the run: counters sampled by the monitor, read over any window later.

Each sample holds cumulative counters, so the orchestrator reads the measured steps as the difference of the
samples around them (run_benchmarks/execute/contention.py), however short the steps are:

- ``busy_s``, ``steal_s``, ``total_s``: /proc/stat summed over the cores the run was given (the union of its
  processes' CPU affinity), busy = user + nice + system + irq + softirq, total = busy + idle + iowait + steal;
- ``own_cpu_s``: CPU time of the run's own processes (those whose environment carries this run's id, the
  orchestrator when it runs here, the monitor), accumulated per process so a process that ends keeps what it
  used; their reaped children's time counts too (the command monitor's tool lives between two samples), less
  what an ended process of the run was already seen using;
- ``load1``: the 1-minute load average (and ``machine_cpus``, what it is read against);
- ``psi_memory_some_s``: /proc/pressure/memory's ``some`` total (time at least one task stalled on memory), None
  where the kernel has no PSI;
- ``own_pids``: the run's processes here, which the accelerator monitor's device processes are told apart by;
- ``others``: the processes (on any core) that are not the run's own and used CPU since the last sample, the most first
  (pid, name, seconds): who, for ``show --verbose``.

Others' CPU is busy - own on the run's cores: it counts what /proc lists no process for (short-lived
processes, the kernel's work) and what another PID namespace hides (a container's monitor sees its host's
/proc/stat). ``own_processes`` counts the run's processes seen besides the monitor: where it is 0 (the monitor
runs in a container of its own, or was started by hand) the run's CPU cannot be told apart and the reader says
so instead of calling the run's own work contention. Standard library only: read once a second beside the
ranks, it costs ~10 ms of CPU per sample on a machine with 300 processes.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from training.contract.names import ENV_ORCHESTRATOR, ENV_RUN_ID
from training.sysinfo import start_environment

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
OTHERS_KEPT = 8  # other processes named per sample, the busiest first
_BUSY = (0, 1, 2, 5, 6)  # user nice system irq softirq (guest is counted in user already)
_TOTAL = (0, 1, 2, 3, 4, 5, 6, 7)  # ... idle iowait steal
_STEAL = 7


@dataclass
class _Seen:
    own: bool
    tagged: bool  # carries the run's id (launcher, workers, guards): their affinity is the cores given
    name: str
    last_ticks: int  # its own CPU
    last_children: int  # its reaped children's
    cpus: frozenset


class ContentionCounters:
    """Cumulative counters of the CPUs the run was given; ``sample()`` is one line of ``host.jsonl``."""

    def __init__(self, proc: Path = Path("/proc"), environ: Optional[dict] = None):
        env = os.environ if environ is None else environ
        self.proc, self.me = proc, os.getpid()
        self.run_id = (env.get(ENV_RUN_ID) or "").encode() or None
        self.orchestrator = _local_pid(env.get(ENV_ORCHESTRATOR, ""))
        self.seen: dict[tuple[int, int], _Seen] = {}
        self.own_ticks = 0
        self.reaped = 0  # ticks of the run's processes that ended, which their parent's children time will repeat
        self.last_sample: Optional[float] = None  # in ticks since boot, the clock of /proc/PID/stat's start

    def sample(self) -> dict:
        now = _ticks_since_boot()
        own_delta, others, cpus = self._processes()
        self.own_ticks += own_delta
        self.last_sample = now
        given = sorted(cpus) if cpus else sorted(os.sched_getaffinity(0))
        busy, steal, total = _cpu_ticks(self.proc, given)
        return {
            "cpus": given, "busy_s": round(busy * TICK_S, 2), "steal_s": round(steal * TICK_S, 2),
            "total_s": round(total * TICK_S, 2), "own_cpu_s": round(self.own_ticks * TICK_S, 2),
            "own_processes": sum(1 for s in self.seen.values() if s.tagged and s.own),
            "own_pids": sorted(pid for (pid, _), s in self.seen.items() if s.own),
            "load1": round(os.getloadavg()[0], 2), "machine_cpus": os.cpu_count(),
            "psi_memory_some_s": _psi_some_s(self.proc / "pressure/memory"),
            "others": [[pid, name, round(ticks * TICK_S, 2)] for pid, name, ticks in others[:OTHERS_KEPT]],
        }

    def _processes(self) -> tuple[int, list, set]:
        """(own CPU ticks since the last sample, [(pid, name, ticks)] of the others that used some, the cores
        the run's processes may use)."""
        own_delta, children, others, cpus, alive = 0, 0, [], set(), set()
        for entry in os.listdir(self.proc):
            if not entry.isdigit():
                continue
            pid = int(entry)
            stat = _stat(self.proc / entry / "stat")
            if stat is None:
                continue
            name, ticks, reaped, start = stat
            key = (pid, start)
            alive.add(key)
            seen = self.seen.get(key)
            if seen is None:
                tagged = pid != self.me and self._tagged(pid)
                # a process started since the last sample used all its CPU inside the interval; one found at
                # the monitor's start counts from now on. Both on the kernel's boot clock, in ticks (a tick's
                # leeway: the start is rounded down); btime, whole seconds, would date a process up to 1 s early
                # and lose what a new one used before it was seen
                new = self.last_sample is not None and start >= self.last_sample - 1
                seen = self.seen[key] = _Seen(tagged or pid in (self.me, self.orchestrator), tagged, name,
                                              0 if new else ticks, 0 if new else reaped,
                                              _affinity(pid) if tagged else frozenset())
            delta, seen.last_ticks = max(0, ticks - seen.last_ticks), ticks
            reaped_delta, seen.last_children = max(0, reaped - seen.last_children), reaped
            if seen.own:
                own_delta += delta
                children += reaped_delta
                cpus |= seen.cpus
            elif delta + reaped_delta:
                others.append((pid, name, delta + reaped_delta))
        for key in set(self.seen) - alive:
            gone = self.seen.pop(key)
            if gone.own:  # its parent's children time will repeat what it was seen using
                self.reaped += gone.last_ticks + gone.last_children
        repeated = min(self.reaped, children)  # counted already while they ran
        self.reaped -= repeated
        others.sort(key=lambda item: -item[2])
        return own_delta + children - repeated, others, cpus

    def _tagged(self, pid: int) -> bool:
        if self.run_id is None:
            return False
        environ = start_environment(pid, self.proc)  # None: another user's process, or gone
        return environ is not None and environ.get(ENV_RUN_ID.encode()) == self.run_id


def _local_pid(tag: str) -> Optional[int]:
    """The orchestrator's pid from its ``host:pid:start`` tag when it runs on this machine."""
    parts = tag.rsplit(":", 2)
    if len(parts) == 3 and parts[0] == socket.gethostname() and parts[1].isdigit():
        return int(parts[1])
    return None


def _ticks_since_boot() -> float:
    """Now on the clock /proc/PID/stat's start time counts (CLOCK_BOOTTIME, in clock ticks)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) / TICK_S


def _stat(path: Path) -> Optional[tuple[str, int, int, int]]:
    """(name, utime + stime, its reaped children's cutime + cstime, start in ticks since boot) of /proc/PID/stat."""
    try:
        text = path.read_bytes().decode(errors="replace")
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        return head.partition("(")[2], int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), \
            int(fields[19])
    except (IndexError, ValueError):
        return None


def _affinity(pid: int) -> frozenset:
    try:
        return frozenset(os.sched_getaffinity(pid))
    except OSError:
        return frozenset()


def _cpu_ticks(proc: Path, cpus: list[int]) -> tuple[int, int, int]:
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = total = 0
    for line in (proc / "stat").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name in wanted:
            values = [int(v) for v in rest.split()]
            values += [0] * (8 - len(values))
            busy += sum(values[i] for i in _BUSY)
            steal += values[_STEAL]
            total += sum(values[i] for i in _TOTAL)
    return busy, steal, total


def _psi_some_s(path: Path) -> Optional[float]:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                return round(int(line.rsplit("total=", 1)[1]) / 1e6, 3)
    except (OSError, ValueError, IndexError):
        pass
    return None

"""The host: CPU utilisation, memory used/total, network and disk throughput (psutil), and the contention
counters of the run's cores (contention.py), where the machine has a Linux /proc."""
from __future__ import annotations

import time

from training.monitor.sampler import Unavailable


class CpuBusy:
    """Utilisation of all CPUs since the last reading, from its own cpu_times snapshots (psutil's
    cpu_percent(None) keeps one global interval, which two samplers would split between them)."""

    def __init__(self, psutil):
        self.psutil, self.last = psutil, psutil.cpu_times()

    def percent(self) -> float:
        now = self.psutil.cpu_times()
        total = sum(now) - sum(self.last)
        idle = (now.idle + getattr(now, "iowait", 0)) - (self.last.idle + getattr(self.last, "iowait", 0))
        self.last = now
        if total <= 0:
            return 0.0
        # Clamped: the kernel's iowait may go backwards between readings, and the sums of float seconds
        # round, so an idle interval could read as -2e-9 % (seen in the suite).
        return min(100.0, max(0.0, 100.0 * (total - idle) / total))


class HostSampler:
    def __init__(self, psutil):
        self.psutil = psutil
        self.cpu = CpuBusy(psutil)
        self.last = (time.monotonic(), psutil.net_io_counters(), psutil.disk_io_counters())
        self.contention = _counters()

    def sample(self) -> dict:
        p = self.psutil
        now, net, disk = time.monotonic(), p.net_io_counters(), p.disk_io_counters()
        then, net0, disk0 = self.last
        self.last = (now, net, disk)
        dt = max(now - then, 1e-6)
        mem = p.virtual_memory()
        out = {"cpu_percent": self.cpu.percent(), "mem_used_bytes": mem.total - mem.available,
               "mem_total_bytes": mem.total}
        if net and net0:
            out["net_rx_bps"] = (net.bytes_recv - net0.bytes_recv) / dt
            out["net_tx_bps"] = (net.bytes_sent - net0.bytes_sent) / dt
        if disk and disk0:
            out["disk_read_bps"] = (disk.read_bytes - disk0.read_bytes) / dt
            out["disk_write_bps"] = (disk.write_bytes - disk0.write_bytes) / dt
        if self.contention is not None:
            try:
                out["contention"] = self.contention.sample()
            except OSError:  # /proc went unreadable: the other figures go on
                self.contention = None
        return out


def _counters():
    from training.monitor.contention import ContentionCounters

    try:
        counters = ContentionCounters()
        counters.sample()  # the baseline: the first sample's processes count from now on
    except OSError:  # no Linux /proc here: the round says its contention was not measured
        return None
    return counters


def open() -> HostSampler:  # noqa: A001 - the sampler interface's name
    try:
        import psutil
    except ImportError:
        raise Unavailable("psutil is not installed for this Python (pip install psutil)") from None
    return HostSampler(psutil)

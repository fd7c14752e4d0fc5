"""The CPU as the accelerator of the embedded default: one device, its utilisation, and where the
machine exposes them, its package temperature and power (RAPL energy counter)."""
from __future__ import annotations

import time
from pathlib import Path

from training.monitor.sampler import Unavailable
from training.monitor.host import CpuBusy

RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")


class CpuSampler:
    def __init__(self, psutil):
        self.psutil = psutil
        self.cpu = CpuBusy(psutil)
        self.energy = self._energy()

    @staticmethod
    def _energy():
        try:
            return time.monotonic(), int(RAPL.read_text())
        except (OSError, ValueError):
            return None

    def _temperature(self):
        read = getattr(self.psutil, "sensors_temperatures", None)
        sensors = read() if read else {}
        for name in ("coretemp", "k10temp", "zenpower", "cpu_thermal"):
            if sensors.get(name):
                return sensors[name][0].current
        return None

    def sample(self) -> dict:
        device = {"index": 0, "name": "cpu", "util_percent": self.cpu.percent(),
                  "temp_c": self._temperature()}
        energy = self._energy()
        if energy and self.energy and energy[1] >= self.energy[1]:
            device["power_w"] = (energy[1] - self.energy[1]) / 1e6 / max(energy[0] - self.energy[0], 1e-6)
            device["power_from"] = "energy counter"  # the time breakdown's energy method (monitoring.energy)
        self.energy = energy
        return {"devices": [device]}


def open() -> CpuSampler:  # noqa: A001
    try:
        import psutil
    except ImportError:
        raise Unavailable("psutil is not installed for this Python (pip install psutil)") from None
    return CpuSampler(psutil)

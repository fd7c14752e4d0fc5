"""NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``): per device utilisation, memory
used/total, power, temperature and SM/memory clocks, and the compute processes on it with their SM
utilisation where the driver samples it (``processes``: [pid, util %, memory bytes]; the orchestrator tells
the run's own from others' by pid). A reading a driver does not support is None."""
from __future__ import annotations

from training.monitor.sampler import Unavailable


class NvmlSampler:
    def __init__(self, nvml):
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            raise Unavailable(f"NVML did not start: {exc}") from None
        if count == 0:
            raise Unavailable("NVML sees no GPU")
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = [self._read(nvml.nvmlDeviceGetName, h) for h in self.handles]
        self.seen_us = [0] * count  # per device, the last process-utilisation sample read

    def _read(self, fn, *args):
        try:
            value = fn(*args)
        except self.nvml.NVMLError:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def sample(self) -> dict:
        n = self.nvml
        devices = []
        for index, handle in enumerate(self.handles):
            util = self._read(n.nvmlDeviceGetUtilizationRates, handle)
            memory = self._read(n.nvmlDeviceGetMemoryInfo, handle)
            power = self._read(n.nvmlDeviceGetPowerUsage, handle)  # milliwatts
            devices.append({
                "index": index, "name": self.names[index],
                "util_percent": util.gpu if util is not None else None,
                "mem_used_bytes": memory.used if memory is not None else None,
                "mem_total_bytes": memory.total if memory is not None else None,
                "power_w": power / 1000 if power is not None else None,
                "temp_c": self._read(n.nvmlDeviceGetTemperature, handle, n.NVML_TEMPERATURE_GPU),
                "sm_clock_mhz": self._read(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_SM),
                "mem_clock_mhz": self._read(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_MEM),
                "processes": self._processes(index, handle),
            })
        return {"devices": devices}

    def _processes(self, index: int, handle) -> list | None:
        """[pid, SM utilisation % or None, memory bytes or None] of each compute process on the device; None
        where the driver cannot list them."""
        listed = self._read(getattr(self.nvml, "nvmlDeviceGetComputeRunningProcesses", lambda h: None), handle)
        if listed is None:
            return None
        util: dict[int, float] = {}
        samples = self._read(getattr(self.nvml, "nvmlDeviceGetProcessUtilization", lambda h, t: None), handle,
                             self.seen_us[index]) or []  # NVML_ERROR_NOT_FOUND (no sample yet) reads as none
        for sample in samples:
            util[sample.pid] = max(util.get(sample.pid, 0), sample.smUtil)
            self.seen_us[index] = max(self.seen_us[index], sample.timeStamp)
        return [[p.pid, util.get(p.pid), p.usedGpuMemory] for p in listed]


def open(nvml=None) -> NvmlSampler:  # noqa: A001
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            raise Unavailable("nvidia-ml-py is not installed for this Python (pip install nvidia-ml-py)") from None
    return NvmlSampler(nvml)

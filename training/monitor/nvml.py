"""NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``): per device utilisation, memory
used/total, power, temperature and SM/memory clocks. A reading a driver does not support is None."""
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
            })
        return {"devices": devices}


def open(nvml=None) -> NvmlSampler:  # noqa: A001
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            raise Unavailable("nvidia-ml-py is not installed for this Python (pip install nvidia-ml-py)") from None
    return NvmlSampler(nvml)

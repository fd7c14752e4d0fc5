"""AMD GPUs through ``rocm-smi --json``: per card utilisation, power, edge temperature and VRAM.

rocm-smi's JSON keys carry their units and vary a little between ROCm releases ("Average Graphics
Package Power (W)" became "Current Socket Graphics Package Power (W)"), so fields are found by
what their key starts with. ``parse`` is separate from running the tool so recorded output can
be tested where there is no AMD GPU.
"""
from __future__ import annotations

import json
import shutil
import subprocess

from training.monitor.sampler import Unavailable

ARGV = ["rocm-smi", "--showuse", "--showpower", "--showtemp", "--showmeminfo", "vram", "--json"]
FIELDS = {  # our field -> key prefixes, first found wins
    "util_percent": ("GPU use (%)",),
    "power_w": ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)"),
    "temp_c": ("Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)"),
    "mem_used_bytes": ("VRAM Total Used Memory (B)",),
    "mem_total_bytes": ("VRAM Total Memory (B)",),
}


def _number(text):
    try:
        return float(str(text).strip())
    except ValueError:
        return None


def parse(text: str) -> dict:
    try:
        cards = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unavailable(f"rocm-smi printed no JSON: {exc}") from None
    devices = []
    for key in sorted((k for k in cards if k.startswith("card")), key=lambda k: int(k[4:] or 0)):
        card = cards[key]
        device = {"index": int(key[4:] or 0)}
        for field, prefixes in FIELDS.items():
            found = next((card[k] for p in prefixes for k in card if k.startswith(p)), None)
            device[field] = _number(found) if found is not None else None
        devices.append(device)
    if not devices:
        raise Unavailable("rocm-smi lists no card")
    return {"devices": devices}


class RocmSmiSampler:
    def sample(self) -> dict:
        try:
            done = subprocess.run(ARGV, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"rocm-smi: {exc}") from None
        return parse(done.stdout)


def open() -> RocmSmiSampler:  # noqa: A001
    if shutil.which("rocm-smi") is None:
        raise Unavailable("rocm-smi is not on PATH (ROCm not installed here)")
    sampler = RocmSmiSampler()
    sampler.sample()  # fails now, as Unavailable, rather than at every interval
    return sampler

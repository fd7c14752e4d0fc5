"""Assertions many test files share about what a run left: a complete ok round, nothing left running."""
from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from .runner import ROOT


def leftover_processes(marker: Path) -> list[str]:
    """Processes whose command line mentions ``marker`` (a run's log root): there must be none after a run."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(marker) in part for part in proc.info["cmdline"] or ()):
                found.append(" ".join(proc.info["cmdline"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


def assert_complete_ok(doc: dict, world_size: int, steps: int, warmup: int, checkout: Path = ROOT,
                       in_image: bool = False) -> None:
    """A complete ok round; ``checkout``: the --root the run used (a test's copy is no git checkout);
    ``in_image``: the ranks ran in the vendor's image, whose Python is Debian's (same minor version as
    this machine's: the wheels downloaded here must install there)."""
    assert doc["status"] == "ok", doc["reason"]
    m = doc["metrics"]
    assert m["world_size"] == world_size
    assert m["measured_steps"] == steps - warmup and m["warmup_steps"] == warmup
    assert m["tokens_per_s_total"] > 0
    assert m["tokens_per_s_per_device"] == pytest.approx(m["tokens_per_s_total"] / world_size)
    assert m["tflops_per_device"] == pytest.approx(m["flops_per_token"] * m["tokens_per_s_per_device"] / 1e12)
    assert m["mfu"] is None and "no fp32 peak for cpu" in m["mfu_note"]
    assert m["peak_memory_bytes"]["max"] > 50 * 2**20 and m["memory_kind"] == "rss"
    assert 0 < m["step_time_s"]["min"] <= m["step_time_s"]["median"] <= m["step_time_s"]["max"]
    env = doc["environment"]
    recorded = env["orchestrator"]["accelbench_commit"]
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        assert recorded == "unknown (not a git checkout)"
    else:  # this checkout's HEAD when the run started: HEAD itself, or before it if a commit came since
        assert recorded == head.stdout.strip() or subprocess.run(
            ["git", "-C", str(checkout), "merge-base", "--is-ancestor", recorded, "HEAD"]).returncode == 0, recorded
    node_env = env["nodes"][0]["environment"]  # every node here is this machine: its facts are known
    assert node_env["hostname"] == socket.gethostname() and node_env["cpu_count"] == os.cpu_count()
    python = platform.python_version()
    assert (node_env["python"].rsplit(".", 1)[0] == python.rsplit(".", 1)[0] if in_image
            else node_env["python"] == python) and "Linux" in node_env["os"]
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert f"model name\t: {node_env['cpu_model']}\n" in cpuinfo
    assert node_env["torch"] == torch_version()


def kill_leftovers(marker: Path) -> None:
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(marker) in part for part in proc.info["cmdline"] or ()):
                proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass

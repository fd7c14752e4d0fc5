"""Vendor probes: a probe that cannot run says why in its field and never stops the run."""
from __future__ import annotations

import sys

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.backends.hosts.local import LocalHost
from run_benchmarks.execute.probes import MAX_CHARS, run_probes


def test_each_way_a_probe_can_fail_is_recorded_as_unavailable_with_its_reason():
    probes = {
        "ok": f"{sys.executable} -c 'print(\"fact\")'",
        "missing_tool": "accelbench-no-such-smi --query",
        "nonzero_exit": f"{sys.executable} -c 'import sys; sys.stderr.write(\"no device\\n\"); sys.exit(3)'",
        "bad_quoting": "nvidia-smi 'unclosed",
        "too_long": f"{sys.executable} -c 'print(\"x\" * 5000)'",
    }
    out = run_probes(LocalHost(HostSpec(name="localhost")), probes)
    assert out["ok"] == "fact"
    assert out["missing_tool"].startswith("unavailable: FileNotFoundError: ")
    assert out["nonzero_exit"] == "unavailable: exit 3: no device"
    assert out["bad_quoting"] == "unavailable: ValueError: No closing quotation"
    assert out["too_long"] == "x" * MAX_CHARS


def test_a_probe_is_argv_not_a_shell_line(tmp_path):
    marker = tmp_path / "ran"
    out = run_probes(LocalHost(HostSpec(name="localhost")), {"hostile": f"echo hi; touch {marker}"})
    assert out["hostile"] == f"hi; touch {marker}" and not marker.exists()

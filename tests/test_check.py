"""``--check`` against references.yaml: every verdict, and ``run --check`` end to end with its exit order
(130 interrupted > 1 a round not ok > 3 a figure outside its band > 0)."""
from __future__ import annotations

import signal

import pytest

from run_benchmarks.results.checks.references import Check, Tolerance

from .conftest import ROOT, write
from .signal_faults import LONG, start, wait_for_step
from .goldens import ONE_THREAD
from .test_runs import SHORT

BAND = Tolerance(value=100.0, lower=0.1, upper=0.2)  # passes 90 .. 120


@pytest.mark.parametrize("figure, measured, verdict", [
    ("tokens_per_s_per_device", 100.0, "pass"),
    ("tokens_per_s_per_device", 90.0, "pass"),                 # the band's edges pass
    ("tokens_per_s_per_device", 120.0, "pass"),
    ("tokens_per_s_per_device", 89.0, "FAIL (regression)"),    # higher is better: below is worse
    ("tokens_per_s_per_device", 121.0, "FAIL (better than the band: update the reference?)"),
    ("peak_memory_bytes", 121.0, "FAIL (regression)"),          # lower is better: above is worse
    ("peak_memory_bytes", 89.0, "FAIL (better than the band: update the reference?)"),
    ("step_time_median_s", 130.0, "FAIL (regression)"),
    ("tokens_per_s_per_device", None, "FAIL (no figure: no ok round)"),
])
def test_every_verdict_and_its_direction(figure, measured, verdict):
    check = Check("gpt2_tiny:torch:cpu:1:1", "-", figure, measured, BAND, "references.yaml")
    assert check.verdict == verdict
    assert check.passed == (verdict == "pass")


def _references(root, tokens_per_s: float, lower: float = 0.05, upper: float = 0.05) -> None:
    write(root / "cases/gpt2_tiny/references.yaml", f"""
references:
  - hardware: cpu
    figures:
      tokens_per_s_per_device: {{value: {tokens_per_s}, lower: {lower}, upper: {upper}, unit: tok/s}}
""")


@pytest.fixture
def checked_root(root):
    (root / "training").symlink_to(ROOT / "training")
    _references(root, 1e9)  # no CPU reaches it: every ok round regresses
    return root


def test_run_check_exits_3_on_a_regression_and_1_when_a_round_also_failed(cli, checked_root):
    """Three real 1x1 runs, one exit code each (one OpenMP thread: goldens.ONE_THREAD)."""
    regress = cli("run", "gpt2_tiny:torch:cpu:1:1", *SHORT, "--root", str(checked_root), "--check",
                  extra_env=ONE_THREAD)
    assert regress.returncode == 3, regress.stdout + regress.stderr
    assert "FAIL (regression)" in regress.stdout
    failed = cli("run", "gpt2_tiny:torch:cpu:1:1", *SHORT, "--set", "debug.fail_at_step=3", "--root",
                 str(checked_root), "--check", log_root=checked_root / "logs-failed", extra_env=ONE_THREAD)
    assert failed.returncode == 1, failed.stdout + failed.stderr  # the failure wins over the regression
    assert "FAIL (no figure: no ok round)" in failed.stdout
    # A band around the first run's figure, wide enough for a shared 2-core machine's noise: a pass, exit 0.
    _references(checked_root, regress.results()[0]["metrics"]["tokens_per_s_per_device"], lower=0.9, upper=9)
    passed = cli("run", "gpt2_tiny:torch:cpu:1:1", *SHORT, "--root", str(checked_root), "--check",
                 log_root=checked_root / "logs-pass", extra_env=ONE_THREAD)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "pass" in passed.stdout and "FAIL" not in passed.stdout


def test_run_check_interrupted_exits_130_over_everything(checked_root, tmp_path):
    orch = start(tmp_path, "gpt2_tiny:torch:cpu:1:1", "--root", str(checked_root), "--check", *LONG)
    wait_for_step(orch, [orch.log_root])
    orch.process.send_signal(signal.SIGINT)
    # interrupted, regressed (no ok round) and not ok at once: 130 wins
    assert orch.wait(120) == 130, orch.stderr()[-3000:]
    assert "Traceback" not in orch.stderr() and "interrupted" in orch.out.read_text() + orch.stderr()

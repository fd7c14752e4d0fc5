"""The change-point rules on generated series (results/history/changes.py): the fast version of
benchmarks/history_changepoints.py (issue 46's precision and recall), and the rules one by one: a single bad day
and two are outliers, three low points are a shift, the newest bad point is pending, a short series is not
judged, identical points divide by no zero, and the threshold holds its significance level on pure noise."""
from __future__ import annotations

import importlib.util
import math
import random

import pytest

from run_benchmarks.results.history import changes

from .conftest import ROOT


def benchmark():
    spec = importlib.util.spec_from_file_location("history_changepoints", ROOT / "benchmarks" / "history_changepoints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_lasting_5_percent_shift_at_1_percent_noise_is_found_and_no_shift_is_rarely_reported():
    """100 series with a shift and 100 without, 28 to 32 days (the benchmark's 300 of 14-60 days: docs/benchmarks.md)."""
    found = benchmark().measure(100, noise=0.01, shift=0.05, seed=7, min_days=28, max_days=32)
    assert found["recall"] >= 0.95 and found["false_alarm_rate"] < 0.05, found
    assert found["bad_days_named"] == 1.0 and found["precision"] >= 0.95 and found["mean_size_error"] < 0.01, found


def level(days: int, noise: float = 0.01, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    return [1000 * math.exp(rng.gauss(0, noise)) for _ in range(days)]


def test_one_or_two_bad_days_are_outliers_and_three_are_a_shift():
    for bad in ([10], [10, 11]):
        values = level(24)
        for day in bad:
            values[day] *= 0.85
        found = changes.find(values, [0.004] * 24)
        assert found.shifts == [] and [o.index for o in found.outliers] == bad
        assert all(-0.17 < o.off < -0.13 and o.sigmas > changes.OUTLIER_SIGMAS for o in found.outliers)
    values = level(24)
    for day in (10, 11, 12):
        values[day] *= 0.85
    found = changes.find(values, [0.004] * 24)
    assert [s.index for s in found.shifts] == [10, 13]  # down for three days and back up: two change points
    assert found.outliers == []


def test_the_newest_bad_point_is_pending_and_a_short_series_is_not_judged():
    values = level(12)
    values[-1] *= 0.8
    found = changes.find(values, [None] * 12)
    assert found.shifts == [] and [(o.index, o.pending) for o in found.outliers] == [(11, True)]
    short = changes.find(level(5), [None] * 5)
    assert not short.judged and short.why == "5 point(s): a change needs 3 on each side (6)"


def test_identical_points_and_a_step_between_them():
    assert changes.find([500.0] * 10, [0.0] * 10).shifts == []
    step = changes.find([500.0] * 5 + [450.0] * 5, [0.0] * 10)
    (shift,) = step.shifts
    assert shift.index == 5 and shift.size == pytest.approx(-0.1) and shift.verdict == "regression"
    assert shift.interval == pytest.approx((-0.1, -0.1))  # no spread on either side: the change is exact
    assert step.sigma == changes.NOISE_FLOOR


def test_the_threshold_is_the_significance_level_of_the_noise_estimate_it_uses():
    """Fresh noise series (another seed than the simulation's) cross the threshold in about ALPHA of cases."""
    crossed = sum(bool(changes.find(level(30, seed=100 + s), [None] * 30).shifts) for s in range(200))
    assert crossed / 200 < 3 * changes.ALPHA, crossed


def test_a_rate_must_be_positive():
    with pytest.raises(ValueError):
        changes.find([1.0, 2.0, 0.0, 1.0, 1.0, 1.0], [None] * 6)


def test_without_ruptures_history_says_how_to_install_it(accelbench, tmp_path, monkeypatch):
    import sys

    from .history_series import rate_series, store_series

    db = tmp_path / "results.db"
    store_series(db, rate_series(8))
    monkeypatch.setitem(sys.modules, "ruptures", None)  # as if the extra were not installed
    done = accelbench("history", "--db", db)
    assert done.returncode == 2 and "pip install 'accelbench[history]' (ruptures==1.1.10)" in done.stderr
    assert "Traceback" not in done.stderr

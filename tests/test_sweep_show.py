"""``accelbench sweep --show``/``--resume`` find a sweep by id, unique prefix or ``last``, from its state file
alone (no run: not an e2e module, unlike test_sweep.py)."""
from __future__ import annotations

import os


def test_sweep_show_last_and_a_prefix_find_the_newest_sweep(accelbench, tmp_path):
    from run_benchmarks.sweep.state import Row, SweepOptions, save

    logs = tmp_path / "logs"
    options = SweepOptions(points=[], axes=["mb"])
    save(logs / "20261125-080000-aaaa", options, [Row(0, {"mb": "1"}, "gpt2_tiny:torch:cpu:1:1", "oom")])
    save(logs / "20261125-090000-bbbb", options, [Row(0, {"mb": "2"}, "gpt2_tiny:torch:cpu:1:1", "ok")])
    os.utime(logs / "20261125-080000-aaaa" / "sweep.json", (1, 1))
    last = accelbench("sweep", "--show", "last", "--log-root", logs)
    assert last.returncode == 0, last.stderr  # was: "logs/last holds no sweep"
    assert "20261125-090000-bbbb" in last.stdout
    prefix = accelbench("sweep", "--show", "20261125-08", "--log-root", logs)
    assert prefix.returncode == 0 and "20261125-080000-aaaa" in prefix.stdout and "oom" in prefix.stdout.lower()
    both = accelbench("sweep", "--show", "20261125", "--log-root", logs)
    assert both.returncode == 2 and "names 2 sweeps" in both.stderr

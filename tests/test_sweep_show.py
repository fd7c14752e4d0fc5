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


def test_a_sweep_prints_its_run_id_before_it_runs_and_how_to_show_it_after(accelbench, tmp_path, monkeypatch):
    """Issue 30: ``sweep`` never printed its run id. The points' execution is left out (no launcher here): the
    id is printed from the plan, before anything would run, and the closing line names it for ``--show``."""
    from run_benchmarks.execute.runner import Outcome
    from run_benchmarks.sweep import runner as sweep_runner

    monkeypatch.setattr(sweep_runner, "run_sweep", lambda sweep, *args, **kwargs: Outcome(sweep.ctx.run_id))
    logs = tmp_path / "logs"
    done = accelbench("sweep", "gpt2_tiny:torch:cpu:1:1", "--grid", "train.micro_batch_size=1,2", "--log-root", logs)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in logs.iterdir() if (p / "sweep.json").is_file()]
    assert f"sweep {run_dir.name}: 2 point(s); logs in {run_dir}" in done.stderr
    assert f"sweep {run_dir.name}: accelbench sweep --show {run_dir.name} --log-root {logs}" in done.stdout

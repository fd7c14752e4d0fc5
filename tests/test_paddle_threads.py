"""A Paddle rank on a CPU keeps the OMP_NUM_THREADS its user chose, as torchrun's ranks do: Paddle's launcher
pins the variable to 1 on import where it was unset, so the worker reads the choice from the environment its
launcher was started with (training/paddle/process.py). Real processes: a parent that changes its own
environment after its start, as the launcher's import of paddle does, and a child that reads the parent's."""
from __future__ import annotations

import os
import subprocess
import sys

from .conftest import ROOT

CHILD = "from training.paddle.process import launcher_setting; print(launcher_setting('OMP_NUM_THREADS'))"
# the launcher: paddle's import sets OMP_NUM_THREADS to 1 where it was unset; then it starts the rank
LAUNCHER = ("import os, subprocess, sys; os.environ.setdefault('OMP_NUM_THREADS', '1'); "
            f"subprocess.run([sys.executable, '-c', {CHILD!r}], check=True)")


def _launch(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", LAUNCHER], env={**base, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_users_thread_count_is_read_from_the_launchers_start():
    assert _launch(OMP_NUM_THREADS="1") == "1"  # the rank's own environment says 1 either way
    assert _launch(OMP_NUM_THREADS="3") == "3"


def test_unset_at_the_launchers_start_is_none_whatever_the_launcher_set_later():
    assert _launch() == "None"  # the rank then takes its share of the cores


def test_no_proc_file_is_none(tmp_path):
    from training.paddle.process import launcher_setting

    assert launcher_setting("OMP_NUM_THREADS", proc=tmp_path) is None

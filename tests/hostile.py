"""What every hostile-input test asserts beside its exit code and its message: that nothing the input named
ran (no marker file appeared) and that nothing was written outside the test's own folders: the checkout
(git's view, ignored folders included, Python's __pycache__ aside: another lane may import a module first),
the home folder (and its ~/.kube), and the pytest base folder's other tests' folders stay as they were, and no
process mentions the test's folder any more."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .checks import leftover_processes
from .runner import ROOT


def _entries(folder: Path) -> set[str]:
    try:
        return {f"{folder}/{name}" for name in os.listdir(folder)}
    except OSError:
        return set()


class Outside:
    """A look at what lies outside ``tmp_path`` before the test, compared by ``unchanged`` after it."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.before = self._look()

    def _look(self) -> set[str]:
        status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60).stdout
        home = Path.home()
        return ({f"checkout: {line}" for line in status.splitlines() if "__pycache__" not in line}  # Python's own
                | _entries(home) | _entries(home / ".kube")
                | (_entries(self.tmp_path.parent) - {str(self.tmp_path)}))

    def unchanged(self) -> None:
        after = self._look()
        assert after - self.before == set(), f"written outside the test's folders: {sorted(after - self.before)}"
        assert not leftover_processes(self.tmp_path), "a process of the test is still running"


def refused(result, *needles: str, code: int = 2, fix: bool = True) -> str:
    """Exit ``code``, accelbench's one-line error naming every needle (with a fix line unless ``fix`` is False:
    a schema's refusal says the fix in its message), no traceback."""
    err = result.stderr
    assert result.returncode == code, (result.returncode, result.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err + result.stdout, err
    assert "accelbench: error: " in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert "fix:" in err or not fix, err
    return err

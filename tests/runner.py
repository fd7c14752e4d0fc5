"""The CLI run as a user runs it (a real subprocess), and what such a run left: shared by the fixtures in
conftest.py and the session's golden runs (tests/goldens.py)."""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent

PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None) if sys.platform.startswith("linux") else None


def ends_with_the_test(sig: int = signal.SIGTERM, then: Optional[Callable[[], None]] = None
                       ) -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for every process a test starts that runs a benchmark (an orchestrator, a launcher): the
    kernel sends it ``sig`` when the thread that started it ends, however the suite ends (a lane's SIGTERM, a
    SIGKILL of pytest by a CI deadline), so no run outlives its test by more than its stop takes (issue 43: a
    killed suite left a run training for ten minutes, re-parented to init). TERM: accelbench stops every node
    as on Ctrl-C, torchrun its workers. Start such processes from the test's own thread (or wait for them in
    the thread that started them): the signal follows that thread. ``then``: another preexec_fn, run after
    (tests/own_core.py's). Just ``then`` where there is no prctl (not Linux)."""
    if _PRCTL is None:
        return then
    parent = os.getpid()

    def tie() -> None:  # in the child, between fork and exec: only the prctl call and a check
        _PRCTL(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the test was gone before the tie was made
            os.kill(os.getpid(), sig)
        if then is not None:
            then()
    return tie


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    log_root: Path

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in self.log_root.iterdir() if p.is_dir()) if self.log_root.is_dir() else []

    def results(self) -> list[dict]:
        """Every round's results.json of the (single) run this call made."""
        (run_dir,) = self.run_dirs()
        return [json.loads(p.read_text()) for p in sorted(run_dir.glob("*/round*/results.json"))]

    def attempts(self) -> list[dict]:
        """The rows the run wrote to the results store, oldest first."""
        from run_benchmarks.results.store.store import ResultStore

        with ResultStore(self.log_root / "results.db") as store:
            return [a.row for a in store.attempts()]


def run_cli(workdir: Path, *args: str, entry: str = "accelbench", timeout: float = 300,
            log_root: Path | None = None, extra_env: dict | None = None, cwd: Path | None = None,
            preexec_fn=None) -> CliResult:
    """``start_task.py``/``accelbench`` in a subprocess, as a user runs it, with the log root
    ``workdir/logs`` (given to ``run``) and TMPDIR ``workdir/system-tmp`` (which must stay empty);
    ``preexec_fn``: run in the child before the command (tests/own_core.py gives it a core)."""
    log_root = log_root or workdir / "logs"
    system_tmp = workdir / "system-tmp"
    system_tmp.mkdir(parents=True, exist_ok=True)
    if entry == "start_task":
        argv = [sys.executable, str(ROOT / "start_task.py"), *args]
    else:
        argv = [sys.executable, "-m", "run_benchmarks.cli", *args]
    if args and args[0] == "run" or entry == "start_task":
        argv += ["--log-root", str(log_root)]
    env = {**os.environ, "TMPDIR": str(system_tmp), "PYTHONPATH": str(ROOT), **(extra_env or {})}
    done = subprocess.run(argv, cwd=cwd or workdir, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=ends_with_the_test(then=preexec_fn))
    return CliResult(done.returncode, done.stdout, done.stderr, log_root)


def copy_tree(source: Path, target: Path) -> None:
    """``shutil.copytree``, with downloaded wheels hard-linked rather than copied: they are never edited, and
    copying them (hundreds of MB) into every test's folder filled the disk. Everything else is a real copy,
    free to edit."""
    import os
    import shutil

    def link_wheels(src, dst):
        if "wheels" in Path(src).parts:
            try:
                os.link(src, dst)
                return dst
            except OSError:  # another file system
                pass
        return shutil.copy2(src, dst)

    # measured_peaks.yaml: this machine's own `accelbench calibrate` figures (ignored by git), never a test's
    # input: a test that expects none stored would otherwise depend on whether the developer calibrated
    shutil.copytree(source, target, copy_function=link_wheels, ignore=shutil.ignore_patterns("measured_peaks.yaml"))


# What this suite expects of its own machine: three lanes side by side on 2 cores (tests/lanes.py), the test
# kind's runs of several lanes on the same stand-in devices. Others' CPU, steal, memory pressure and other
# processes on a device are the lanes' own, so no round may turn contended (not judged: --check exit 7) by the
# lanes alone. Every test_conf a real run of the suite reads says so (``expect_shared_machine``): the `root`
# fixture's copy, kind_root's, the goldens' test_conf files. Tests of contention set their own limits.
SHARED_MACHINE = {"others_cpu_share": None, "steal_share": None, "memory_pressure_share": None,
                  "device_processes": None}


def expect_shared_machine(test_conf: Path) -> Path:
    """``test_conf`` with the suite's contention limits (SHARED_MACHINE); made if missing."""
    import yaml

    data = yaml.safe_load(test_conf.read_text()) if test_conf.is_file() else {}
    data = data or {}
    data["contention"] = {**(data.get("contention") or {}), **SHARED_MACHINE}
    test_conf.parent.mkdir(parents=True, exist_ok=True)
    test_conf.write_text(yaml.safe_dump(data, sort_keys=False))
    return test_conf

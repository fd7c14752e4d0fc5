"""Shared helpers: the checkout's root, and the CLI run as a user runs it (a real subprocess)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from .infra.browser import browser  # noqa: F401 - session fixture: a headless Chromium, started once
from .infra.postgres import postgres  # noqa: F401 - session fixture: a private PostgreSQL server, started once
from .infra.slurm import slurm_cluster  # noqa: F401 - session fixture: the test Slurm, started once

from .runner import (ROOT, CliResult, copy_tree, expect_shared_machine,  # noqa: F401 - what test modules import
                     run_cli)


# Under CI=true a skip is a failure, unless its reason is one that holds on every CI machine: hardware no
# CI machine has. A paddle that fails to import, a dockerd that will not start or a missing sshd must fail
# the run, not hide in the "skipped" count. A real Kubernetes cluster is opt-in (tests/test_kubernetes_e2e.py).
# Locally skips stay possible; -ra lists each with its reason.
CI_SKIP_REASONS = ("needs a GPU", "needs an accelerator", "needs a Kubernetes cluster")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _fail_skip_in_ci(report) -> None:
    if not (_in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if not reason.startswith(CI_SKIP_REASONS):
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true, where a skip is a failure (allowed only for: "
                           f"{', '.join(CI_SKIP_REASONS)}): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _fail_skip_in_ci((yield).get_result())


# What makes a test end to end (marker e2e, skipped by the inner loop's -m "not e2e"): a fixture that starts
# something real, or a module whose tests start processes themselves.
E2E_FIXTURES = {"cli", "sshd", "engine", "cpu_torch_image", "slurm_cluster", "accelbench_containers", "postgres",
                "browser"}
E2E_MODULES = {"test_parity", "test_paddle", "test_paddle_layouts", "test_torch_memory", "test_signals",
               "test_slurm", "test_micro_paddle", "test_store_faults", "test_sweep", "test_cli_imports",
               "test_paddle_finetune_layouts", "test_loss_runs", "test_breakdown_pipeline", "test_contention_runs",
               "test_hostile_runs"}


# Lanes (``--lane``): ``./dev test`` runs the suite as three pytest processes side by side, because one
# process leaves most of the machine idle (the suite waits on launchers, sshd, Docker, Slurm and deadlines).
# Each session fixture is used in one lane only, so nothing is built twice: "infra" holds every test of the
# sshd cluster, the Docker engine and Slurm, "local" the other end-to-end tests (local golden runs, signals,
# parity launches), "inprocess" the rest (-m "not e2e"). Modules that share no session fixture with their lane
# are moved to even the lanes out (LANE_OF_MODULE, from the lanes' times in one run: docs/benchmarks.md).
LANES = ("inprocess", "local", "infra")
INFRA_FIXTURES = {"sshd", "engine", "cpu_torch_image", "slurm_cluster", "accelbench_containers"}
# Session services outside "infra", each in the one lane LANE_OF_MODULE gives every module that uses it: the private
# PostgreSQL server (tests/infra/postgres.py) runs in "inprocess", the lane with the most room; so do Paddle's
# shared two-rank launches (tests/paddle_pairs.py) and the shared spawn of two torch ranks (tests/torch_pairs.py).
ONE_LANE_FIXTURES = INFRA_FIXTURES | {"postgres", "browser", "paddle_inputs", "paddle_pairs", "torch_pairs"}
# Lanes of one CI run (2026-11-27, after issue 33's rank tests were added): local 1,126 s, infra 1,015 s,
# inprocess 645 s of test time; so the new rank tests and Paddle's micro-benchmarks run in "inprocess".
LANE_OF_MODULE = {"test_sweep": "infra", "test_micro_paddle": "inprocess", "test_paddle": "inprocess",
                  # its Paddle runs join paddle_pairs' launches (was infra with launches of its own, 55 s)
                  "test_paddle_finetune_layouts": "inprocess",
                  "test_kubernetes_netns": "infra", "test_ppo_breakdown_worker": "inprocess",
                  "test_breakdown_pipeline": "inprocess", "test_breakdown_tp": "inprocess",
                  "test_paddle_breakdown_fleet_launch": "inprocess", "test_paddle_breakdown_launch": "inprocess",
                  "test_store_postgres": "inprocess", "test_store_postgres_cli": "inprocess",
                  "test_store_postgres_runs": "inprocess", "test_contention_runs": "inprocess",
                  # lanes of the fresh-clone run at 7aafe44: infra 1,141 s, local 1,247 s, inprocess 1,273 s of
                  # test time; these two (59 and 38 s, no session fixture) even them out
                  "test_breakdown_lever": "infra", "test_check": "infra",
                  # fresh clone at ef75232 (the workers' collector off until their measured steps): infra 1,051 s,
                  # local 1,078 s, inprocess 1,155 s; test_mfu_twin (43 s, no session fixture) moved to infra
                  "test_mfu_twin": "infra", "test_html_browser": "inprocess",
                  # fresh clone at 0169e99: infra 1,038 s, local 1,043 s, inprocess 1,097 s; test_history (27 s of
                  # in-process work, no session fixture) moved to infra
                  "test_history": "infra",
                  "test_history_stores": "inprocess",
                  # a working-tree run of the lanes after this session's cuts (2026-11-29, fifth session): local
                  # 868 s, infra 698 s, inprocess 856 s; test_history_runs (117 s, seven runs of its own) to infra,
                  # test_models (42 s in-process, no session fixture) to local
                  "test_history_runs": "infra", "test_models": "local"}


def pytest_addoption(parser):
    parser.addoption("--lane", choices=LANES, help="run one lane of the suite (./dev test runs all three at once)")


def lane_of(item) -> str:
    module = item.module.__name__.rsplit(".", 1)[-1]
    if module in LANE_OF_MODULE:
        return LANE_OF_MODULE[module]
    if item.get_closest_marker("e2e") is None:
        return "inprocess"
    return "infra" if set(getattr(item, "fixturenames", ())) & INFRA_FIXTURES else "local"


def _one_lane_per_session_fixture(items) -> None:
    """A session fixture used in two lanes would be built twice, at the same time: refuse to collect."""
    lanes: dict[str, set] = {}
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            if name in ONE_LANE_FIXTURES or name.startswith("golden_"):
                lanes.setdefault(name, set()).add(lane_of(item))
    shared = {name: sorted(found) for name, found in lanes.items() if len(found) > 1}
    if shared:
        raise pytest.UsageError(f"session fixtures used in several lanes (tests/conftest.py LANE_OF_MODULE): {shared}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & E2E_FIXTURES or any(f.startswith("golden_") for f in fixtures) \
                or item.module.__name__.rsplit(".", 1)[-1] in E2E_MODULES:
            item.add_marker(pytest.mark.e2e)
    _one_lane_per_session_fixture(items)
    lane = config.getoption("--lane")
    if lane:
        kept = [item for item in items if lane_of(item) == lane]
        config.hook.pytest_deselected(items=[item for item in items if lane_of(item) != lane])
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _fail_skip_in_ci((yield).get_result())  # a module-level skip (importorskip) skips all its tests at once


@pytest.fixture
def cli(tmp_path):
    """Run ``start_task.py``/``accelbench`` in a subprocess with a private log root and TMPDIR."""

    def run(*args: str, **options) -> CliResult:
        return run_cli(tmp_path, *args, **options)

    run.system_tmp = tmp_path / "system-tmp"
    run.system_tmp.mkdir()
    return run


@pytest.fixture
def accelbench(tmp_path, monkeypatch):
    """The CLI in this process, called as the ``cli`` fixture calls it (same arguments; ``env`` for its
    ``extra_env``): ``dispatch`` of the parsed argv, exactly what the console script runs after parsing
    (``entry="start_task"``: start_task.main), with stdout and stderr captured, the current folder ``cwd``
    (default the test's), ``env`` set and TMPDIR the test's own for this call, and ``run`` given
    ``--log-root``. For commands that never reach a launcher: it saves the ~1.5 s start of a new interpreter.
    An exception other than a UserError escapes (a traceback fails the test), and so does a command that
    leaves its signal handlers installed in this process.

    Rich's width is what a subprocess gets: stdout is no terminal here either (a StringIO), so
    ``cli.make_console`` prints 160 columns, whatever COLUMNS says."""
    import contextlib
    import io
    import signal
    import tempfile

    from run_benchmarks.cli.main import build_parser, dispatch
    from run_benchmarks.signals import HANDLED

    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir(exist_ok=True)

    def run(*args: str, entry: str | Callable = "accelbench", cwd: Path | None = None, env: dict | None = None,
            log_root: Path | None = None) -> CliResult:
        log_root = log_root or tmp_path / "logs"
        argv = [str(a) for a in args]
        if argv and argv[0] == "run" and entry == "accelbench" or entry == "start_task":
            argv += ["--log-root", str(log_root)]
        handlers = {sig: signal.getsignal(sig) for sig in HANDLED}
        with monkeypatch.context() as m:
            m.chdir(cwd or tmp_path)
            for key, value in {"TMPDIR": str(system_tmp), **(env or {})}.items():
                m.setenv(key, value)
            m.setattr(tempfile, "tempdir", None)  # read again from TMPDIR, as a new process would
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    if entry == "start_task":
                        import start_task

                        code = start_task.main(argv)
                    elif callable(entry):  # another entry's main(argv): FlagPerf's scripts (its own log root)
                        code = entry(argv)
                    else:
                        code = dispatch(build_parser().parse_args(argv))
                except SystemExit as exc:  # argparse's own refusals
                    code = exc.code if isinstance(exc.code, int) else 2
        left = {sig: handler for sig, handler in handlers.items() if signal.getsignal(sig) is not handler}
        for sig, handler in left.items():
            signal.signal(sig, handler)
        assert not left, f"{' '.join(argv)} left its handlers of {', '.join(s.name for s in left)} installed"
        return CliResult(code, out.getvalue(), err.getvalue(), log_root)

    run.system_tmp = system_tmp
    return run


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def root(tmp_path) -> Path:
    """A private copy of the checkout's cases/, vendors/ and configs/, free to edit; its test_conf expects the
    suite's shared machine (runner.SHARED_MACHINE)."""
    copy = tmp_path / "root"
    for folder in ("cases", "vendors", "configs"):
        copy_tree(ROOT / folder, copy / folder)
    expect_shared_machine(copy / "configs" / "test_conf.yaml")
    return copy


# Session fixtures, defined once here so every module shares each: the test hosts (tests/infra/hosts.py: one
# sshd cluster, one Docker engine with the base image, the vendor images) and the golden runs (tests/goldens.py).
from .infra.hosts import accelbench_containers, cpu_torch_image, engine, sshd  # noqa: E402,F401
from .goldens import (golden_bundle, golden_containers, golden_default, golden_failures, golden_killed,  # noqa: E402,F401
                      golden_local, golden_micro, golden_ssh, golden_two_nodes)
from .paddle_pairs import paddle_inputs, paddle_pairs  # noqa: E402,F401 - Paddle's shared two-rank launches
from .torch_pairs import torch_pairs  # noqa: E402,F401 - one spawn of two torch ranks for the worker tests

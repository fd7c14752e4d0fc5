"""The Runner (run_benchmarks/execute/runner.py): a plan run against a store, to an Outcome; the CLI only says it
and chooses the exit status (cli/run.py: exit_status). In-process: the exit statuses from outcomes of every
kind, and the store's lifecycle on real plans that start nothing (an empty plan, an SSH host preflight refuses).
The rounds themselves, signals and full disks are the e2e tests' (test_signals, test_store_faults, test_outcomes).
"""
from __future__ import annotations

import errno
import json
import signal
from pathlib import Path

import pytest

from run_benchmarks import signals
from run_benchmarks.cli.exit_codes import (EXIT_CONTENDED, EXIT_FAILED, EXIT_NOT_RECORDED, EXIT_OK,
                                          EXIT_REGRESSION)
from run_benchmarks.cli.run import exit_status
from run_benchmarks.errors import UserError
from run_benchmarks.execute.environment import orchestrator_environment
from run_benchmarks.execute.quiet import NotQuiet
from run_benchmarks.execute.runner import Outcome, Runner
from run_benchmarks.plan import RunPlan
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store import location
from run_benchmarks.results.store.store import ResultStore

from .conftest import ROOT, write


def _round(status: str) -> RoundResult:
    return RoundResult(case_name="gpt2_tiny:torch:cpu:1:1", round=1, dir=Path("/nonexistent"), status=status)


OK, FAILED = _round("ok"), _round("failed")
FULL = OSError(errno.ENOSPC, "No space left on device")
BUSY = NotQuiet("the hosts stayed busy")


@pytest.mark.parametrize("outcome, regression, expected", [
    (Outcome("r", [OK]), EXIT_OK, EXIT_OK),
    (Outcome("r", [OK]), EXIT_REGRESSION, EXIT_REGRESSION),  # --check's verdict, on a run whose rounds are ok
    (Outcome("r", [OK, FAILED]), EXIT_REGRESSION, EXIT_FAILED),
    (Outcome("r", []), EXIT_OK, EXIT_FAILED),  # nothing ran is no success
    (Outcome("r", [OK], refused=BUSY), EXIT_OK, EXIT_CONTENDED),
    (Outcome("r", [FAILED], refused=BUSY), EXIT_OK, EXIT_FAILED),
    (Outcome("r", [OK], unstored=["round 1"]), EXIT_REGRESSION, EXIT_NOT_RECORDED),
    (Outcome("r", [FAILED], stopped=FULL), EXIT_OK, EXIT_NOT_RECORDED),
    (Outcome("r", [OK], stopped=FULL, interrupted=True, signal=signal.SIGTERM), EXIT_OK, 143),
    (Outcome("r", [], started=False, interrupted=True, signal=signal.SIGHUP), EXIT_OK, 129),
    (Outcome("r", [OK], interrupted=True), EXIT_OK, 130),  # a KeyboardInterrupt of no signal: Ctrl-C's
])
def test_the_exit_status_is_the_first_that_applies_of_the_readmes_table(outcome, regression, expected):
    assert exit_status(outcome, regression) == expected


def test_an_outcome_names_its_ending_as_the_store_records_it():
    assert [Outcome("r").ending, Outcome("r", interrupted=True, stopped=FULL).ending,
            Outcome("r", stopped=FULL).ending, Outcome("r", refused=BUSY).ending] == \
        ["done", "interrupted", "aborted", "aborted"]


def _runner(plan: RunPlan, db: Path) -> Runner:
    return Runner(plan, location.file(db), None, orchestrator_environment(ROOT), plan_root=ROOT,
                  check_root=ROOT, warn=lambda notice: None)


def _plan(tmp_path: Path, cluster: Path | None = None) -> RunPlan:
    inputs = load_inputs(ROOT, None, cluster)
    return build_run_plan(inputs, ["gpt2_tiny:torch:cpu:1:1"], "20261128-120000-test", tmp_path / "logs")


def test_a_plan_runs_against_a_store_made_after_preflight_and_its_run_is_recorded_with_its_ending(tmp_path):
    """A real Runner on a plan with no case (nothing to start): the store is made, the run begun and ended
    ``done``, summary.json written, --check's verdicts taken from what it stored (nothing: no row)."""
    full = _plan(tmp_path)
    plan = RunPlan(full.run_id, full.dir, [], full.cluster)
    db = tmp_path / "results.db"
    with signals.restored():
        outcome = _runner(plan, db).run()
    assert (outcome.started, outcome.interrupted, outcome.recorded, outcome.where) == (True, False, True, str(db))
    assert outcome.verdicts is not None and outcome.verdicts.checks == [] and outcome.verdicts.losses == []
    assert json.loads((plan.dir / "summary.json").read_text()) == {"run_id": plan.run_id, "rounds": []}
    with ResultStore(db) as store:
        (run,) = store.runs()
    assert (run["run_id"], run["status"], run["log_dir"]) == (plan.run_id, "done", str(plan.dir))
    assert exit_status(outcome) == EXIT_FAILED  # no round ran


def _unreachable(tmp_path: Path) -> Path:
    return write(tmp_path / "cluster.yaml", "hosts:\n  - {name: far, backend: ssh, address: 127.0.0.1, port: 1, "
                                            f"known_hosts: {tmp_path / 'none'}}}\n")


def test_a_run_refused_at_preflight_leaves_no_store_and_gives_the_handlers_back(tmp_path):
    plan = _plan(tmp_path, _unreachable(tmp_path))
    db = tmp_path / "results.db"
    before = {sig: signal.getsignal(sig) for sig in signals.HANDLED}
    with signals.restored(), pytest.raises(UserError, match="host far"):
        _runner(plan, db).run()
    assert not db.exists() and not plan.dir.exists()
    assert {sig: signal.getsignal(sig) for sig in signals.HANDLED} == before


def test_an_existing_store_is_checked_before_any_host_is_touched(tmp_path):
    """A file that is no store is the refusal, not the host preflight would refuse after it."""
    plan = _plan(tmp_path, _unreachable(tmp_path))
    db = write(tmp_path / "results.db", "not a database\n" * 100)
    with signals.restored(), pytest.raises(UserError, match="is not an accelbench results store") as refused:
        _runner(plan, db).run()
    assert "host far" not in str(refused.value)

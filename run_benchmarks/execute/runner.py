"""The Runner: a plan run against a results store, to an ``Outcome`` the caller reads.

What every run does around its rounds, in one place for ``accelbench run``, ``start_task.py`` and sweeps:

- the signals handled (INT, TERM, HUP end the run as Ctrl-C does; a second one hurries the stop);
- an existing store checked (locked, damaged) before any host is touched, a new one created only after
  preflight, so a run refused at preflight leaves no trace; a signal during preflight: nothing ran, nothing
  stored;
- the rounds (``Runner.rounds``: the plan's, in order; a sweep runs its points instead), each attempt a row
  as soon as it ends;
- the ending: ``interrupted`` (a signal), ``aborted`` (results that could not be written, a disk full; or
  ``--require-quiet``'s hosts that stayed busy) or ``done``, recorded with the run even where the store fails
  then (what it could not take is listed in ``Outcome.unstored``, for ``store repair``); summary.json;
- ``--check``'s verdicts on what the run stored (results/checks/verdicts.py).

The Runner prints nothing and chooses no exit status: the caller says the outcome (cli/run.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from run_benchmarks import signals
from run_benchmarks.execute.launch import Execution
from run_benchmarks.execute.outcome import ResultsUnwritable
from run_benchmarks.execute.quiet import NotQuiet
from run_benchmarks.execute.rounds import Reporter
from run_benchmarks.pathnames import write_text_atomically
from run_benchmarks.plan import RunPlan
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable, is_full, orchestrator_identity
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.store import ResultStore

if TYPE_CHECKING:  # --check's code (~0.15 s of start-up) is loaded by the runs that ask for it
    from run_benchmarks.results.checks.verdicts import Verdicts

SUMMARY_FIGURES = ("tokens_per_s_per_device", "tflops_per_device", "mfu")


@dataclass
class Outcome:
    """How a run ended, for the caller to say and to turn into an exit status."""

    run_id: str
    results: list[RoundResult] = field(default_factory=list)
    where: str = ""  # the store the run's rows went to
    started: bool = True  # False: a signal came during preflight, so nothing ran and nothing was stored
    interrupted: bool = False
    signal: Optional[int] = None  # the first signal that arrived (None: a KeyboardInterrupt of another kind)
    stopped: Optional[OSError] = None  # results could not be written (disk full): the run stopped there
    refused: Optional[NotQuiet] = None  # --require-quiet: the hosts stayed busy past the deadline
    unstored: list[str] = field(default_factory=list)  # what the store did not take, for `store repair`
    verdicts: Optional[Verdicts] = None  # --check's, on what the run stored

    @property
    def ending(self) -> str:
        return "interrupted" if self.interrupted else "aborted" if self.stopped or self.refused else "done"

    @property
    def recorded(self) -> bool:
        """Everything measured is in the store and the run's folder."""
        return self.stopped is None and not self.unstored

    @property
    def all_ok(self) -> bool:
        return bool(self.results) and all(r.status == "ok" for r in self.results)


class Runner:
    """Runs ``plan`` against the store at ``store_at``: ``run()`` returns the Outcome. ``check_root``: the tree
    whose references ``--check`` reads (None: no check). A sweep subclasses ``preflight`` and ``rounds``."""

    def __init__(self, plan: RunPlan, store_at: StoreLocation, reporter: Reporter, environment: dict, *,
                 plan_root: Optional[Path] = None, allow_version_mismatch: bool = False,
                 require_quiet: Optional[float] = None, check_root: Optional[Path] = None,
                 say: Callable[[str], None] = print, warn: Callable[[str], None] = print):
        self.plan, self.store_at, self.reporter, self.environment = plan, store_at, reporter, environment
        self.plan_root, self.allow_version_mismatch = plan_root, allow_version_mismatch
        self.require_quiet, self.check_root = require_quiet, check_root
        self.say, self.warn = say, warn  # a line while rounds run; a notice before the first (leftovers found)

    def execution(self, plan: RunPlan) -> Execution:
        return Execution(plan, self.reporter, self.environment, allow_version_mismatch=self.allow_version_mismatch,
                         plan_root=self.plan_root, require_quiet=self.require_quiet, say=self.say)

    def preflight(self) -> Execution:
        """The plan's hosts connected and checked, or the error that refuses the run (everything let go)."""
        execution = self.execution(self.plan)
        try:
            execution.connect_and_preflight()
        except BaseException:
            execution.close()
            raise
        return execution

    def rounds(self, execution: Execution, store: ResultStore) -> None:
        """Every round of the plan, in order."""
        execution.store = store
        execution.run()

    def run(self) -> Outcome:
        signals.install()  # TERM and HUP end a run as Ctrl-C does (see signals: exit 128 + the signal's number)
        outcome = Outcome(self.plan.run_id)
        store: Optional[ResultStore] = None
        execution: Optional[Execution] = None
        try:
            store = ResultStore(self.store_at) if self.store_at.exists() else None  # a --db that is no store
            execution = self.preflight()
            for notice in execution.notices:
                self.warn(notice)
            store = store or ResultStore(self.store_at)
            store.begin_run(self.plan.run_id, _now(), self.environment["argv"],
                            self.environment["accelbench_commit"], str(self.plan.dir),
                            orchestrator=orchestrator_identity())
        except BaseException as exc:
            if store is not None:
                store.close()
            if execution is not None:
                execution.close()
            if isinstance(exc, KeyboardInterrupt):  # nothing ran yet: nothing to record
                outcome.started, outcome.interrupted, outcome.signal = False, True, signals.received()
                return outcome
            raise
        outcome.where, outcome.results = str(store.where), execution.results
        try:
            self._rounds(execution, store, outcome)
            self._write_summary(outcome)
            if self.check_root is not None:
                from run_benchmarks.results.checks import verdicts

                outcome.verdicts = verdicts.of_run(store, self.plan.run_id, self.check_root)
            outcome.unstored = list(store.unstored)
        finally:
            store.close()
        outcome.signal = signals.received()
        return outcome

    def _rounds(self, execution: Execution, store: ResultStore, outcome: Outcome) -> None:
        try:
            self.rounds(execution, store)
        except NotQuiet as exc:
            outcome.refused = exc
        except KeyboardInterrupt:
            outcome.interrupted = True
            signals.settle()  # a further signal only hurries what is left; the results are written whole
        except OSError as exc:
            if not (isinstance(exc, ResultsUnwritable) or is_full(exc)):
                raise
            outcome.stopped = exc
        finally:
            signals.settle()
            execution.close()
            try:
                store.end_run(self.plan.run_id, _now(), outcome.ending)
            except (StoreError, StoreUnavailable) as exc:
                store.unstored.append(f"the end of the run ({outcome.ending}): "
                                      f"{getattr(exc, 'reason', '') or str(exc).splitlines()[0]}")

    def _write_summary(self, outcome: Outcome) -> None:
        try:
            write_summary(self.plan, outcome.results)
        except OSError as exc:  # the rounds' results.json and the store hold what it would have said
            outcome.stopped = outcome.stopped or exc


def write_summary(plan: RunPlan, results: list[RoundResult]) -> None:
    """summary.json: one line per round, from the same record as its results.json and its store row."""
    plan.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in results:
        record = r.record
        metrics = (record.metrics if record else None) or {}
        rows.append({"case_name": r.case_name, "round": r.round,
                     "status": record.status.value if record else r.status,
                     "reason": record.reason if record else r.reason, "results": str(r.dir / "results.json"),
                     "workload_hash": record.workload_hash if record else None,
                     **{key: metrics.get(key) for key in SUMMARY_FIGURES}})
    write_text_atomically(plan.dir / "summary.json", json.dumps({"run_id": plan.run_id, "rounds": rows}, indent=2)
                          + "\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

"""The Runner over a sweep's points (execute/runner.py: the store's lifecycle, the signals, the ending and
summary.json are a run's): one preflight of the case names left to run, where a case name it refuses only
skips its points, then the points one after another (sweep/run.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from run_benchmarks import signals
from run_benchmarks.errors import PreflightError
from run_benchmarks.execute.launch import Execution
from run_benchmarks.execute.runner import Outcome, Runner
from run_benchmarks.plan import CasePlan, RunPlan
from run_benchmarks.results.store.location import StoreLocation
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.sweep.run import Planned, Sweep, world_of
from run_benchmarks.sweep.state import Row, save


class SweepRunner(Runner):
    """A sweep's points run against the store at ``store_at``; ``planned``: every point, planned."""

    def __init__(self, sweep: Sweep, planned: list[Planned], store_at: StoreLocation,
                 check_root: Optional[Path] = None, warn: Callable[[str], None] = print):
        ctx = sweep.ctx
        plan = RunPlan(ctx.run_id, ctx.run_dir, sweep.needs_running(planned), ctx.inputs.cluster)
        super().__init__(plan, store_at, sweep.progress, ctx.environment, plan_root=ctx.inputs.paths.root,
                         allow_version_mismatch=ctx.options.allow_version_mismatch, check_root=check_root,
                         warn=warn)
        self.sweep, self.planned = sweep, planned

    def preflight(self) -> Execution:
        """One preflight for every case to run. When it refuses, each case name is preflighted alone, so only
        the points it refuses (too few devices, framework missing or of another version) are skipped, with
        why, and the rest run; when it refuses every case name, its first error stands for the sweep."""
        cases = self.plan.cases
        try:
            return super().preflight()
        except PreflightError as exc:
            first = exc
        refused: dict[str, str] = {}
        for case in {str(case.name): case for case in cases}.values():
            alone = self.execution(self._plan_of([case]))
            try:
                alone.connect_and_preflight()
            except PreflightError as exc:
                refused[str(case.name)] = exc.message
            finally:
                alone.close()
        if len(refused) == len({str(case.name) for case in cases}):
            raise first
        self.planned = refuse(self.planned, refused)
        self.plan = self._plan_of([case for case in cases if str(case.name) not in refused])
        return super().preflight()

    def _plan_of(self, cases: list[CasePlan]) -> RunPlan:
        return RunPlan(self.plan.run_id, self.plan.dir, cases, self.plan.cluster)

    def rounds(self, execution: Execution, store: ResultStore) -> None:
        execution.store = store
        self.sweep.run_all(self.planned, execution)


def run_sweep(sweep: Sweep, planned: list[Planned], store_at: StoreLocation, check_root: Optional[Path] = None,
              warn: Callable[[str], None] = print) -> Outcome:
    """Preflight once (when anything is left to run), then every point; the sweep can be resumed from here on,
    whatever ends it. With nothing left to run no host is touched and the run gets no row of its own."""
    ctx = sweep.ctx
    save(ctx.run_dir, ctx.options, [])
    if sweep.needs_running(planned):
        return SweepRunner(sweep, planned, store_at, check_root, warn).run()
    signals.install()
    outcome = Outcome(ctx.run_id)
    try:
        sweep.run_all(planned, None)
    except KeyboardInterrupt:
        outcome.interrupted, outcome.signal = True, signals.received()
        return outcome
    finally:
        signals.settle()
    if check_root is not None:
        from run_benchmarks.results.checks import verdicts

        with ResultStore(store_at) as store:
            outcome.verdicts = verdicts.of_run(store, ctx.run_id, check_root)
    return outcome


def refuse(planned: list[Planned], refused: dict[str, str]) -> list[Planned]:
    """Points whose case name preflight refused become skipped rows (nothing of them was started)."""
    return [Planned(p.point, skipped=Row(p.point.index, p.point.labels, p.point.case_name, "skipped",
                                         f"preflight: {refused[str(p.case.name)]}", world_size=world_of(p.point)))
            if p.case is not None and str(p.case.name) in refused else p for p in planned]

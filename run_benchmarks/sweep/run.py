"""Run a sweep: plan every point, skip what cannot run, preflight once, then run the points one after the
other through the same rounds a run uses; every point gets a row, whatever it ended as.

A point is planned twice: once up front (to skip what the plan refuses and to know its workload hash)
and again just before it runs (so its master port is free then). A point whose hash already has a
finished round in the run is not run again: that is how ``--resume`` continues an interrupted sweep.
Ctrl-C lets the running point finish and stops the sweep before the next; a second Ctrl-C stops the running
point too (recorded ``interrupted``, as ``accelbench run`` does).
"""
from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from run_benchmarks.catalog import casename
from run_benchmarks import signals
from run_benchmarks.errors import UserError
from run_benchmarks.execute.launch import Execution
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.plan import CasePlan, PlanInputs
from run_benchmarks.planner.build import build_case_plan
from run_benchmarks.execute.rounds import RoundExecutor
from run_benchmarks.sweep.batch import search_max_batch
from run_benchmarks.sweep.grid import Point, assignment
from run_benchmarks.sweep.progress import SweepProgress
from run_benchmarks.sweep.state import Row, SweepOptions, done_points, save
from run_benchmarks.results.rounds.workload import resolved_workload, workload_hash

UNSUPPORTED_MARK = "cannot run this layout yet"  # plan_checks.check_layout: the framework's gap, not the layout's


class StopAfterPoint:
    """Ctrl-C in a sweep: the first lets the running point finish, then the sweep stops before the next; a
    second stops the running point now (the run's handler: recorded ``interrupted``). TERM and HUP keep
    the run's meaning (stop now)."""

    def __init__(self, say: Callable[[str], None]):
        self.say, self.requested, self.previous = say, False, None

    def __enter__(self) -> "StopAfterPoint":
        self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _handle(self, signum: int, frame) -> None:
        if not self.requested:
            self.requested = True
            self.say("accelbench: SIGINT: the sweep stops after the running point (again to stop it now)")
            return
        signal.signal(signal.SIGINT, self.previous)
        self.previous(signum, frame)

    def check(self) -> None:
        if self.requested:
            raise signals.Interrupted(signal.SIGINT)


@dataclass
class Planned:
    point: Point
    case: Optional[CasePlan] = None
    skipped: Optional[Row] = None


@dataclass
class SweepContext:
    """What every point shares: the loaded configs, the run, the sweep's options, and the rows so far."""

    inputs: PlanInputs
    run_id: str
    run_dir: Path
    options: SweepOptions
    environment: dict
    rows: list[Row] = field(default_factory=list)


class Sweep:
    def __init__(self, ctx: SweepContext, progress: SweepProgress):
        self.ctx, self.progress = ctx, progress
        self.done = done_points(ctx.run_dir)
        self.executor: Optional[RoundExecutor] = None
        self.stop = StopAfterPoint(lambda text: progress.console.print(text, markup=False, soft_wrap=True))

    # ------------------------------------------------------------ planning

    def plan(self, point: Point, extra: tuple[str, ...] = (), tag: str = "") -> Planned:
        point = point.with_sets(*extra) if extra else point
        try:
            case = build_case_plan(self.ctx.inputs, point.case_name, self.ctx.run_id, self._case_dir(point, tag),
                                   point.extern_config, tuple(point.sets), self.ctx.options.timeout_s)
        except UserError as exc:
            status = "unsupported" if UNSUPPORTED_MARK in exc.message else "skipped"
            return Planned(point, skipped=Row(point.index, point.labels, point.case_name, status,
                                              " ".join(exc.message.split()), world_size=world_of(point)))
        return Planned(point, case=case)

    def _case_dir(self, point: Point, tag: str) -> Path:
        """p03-<slug>: a folder of its own per point; a point run again (resumed) gets a fresh one beside."""
        base = f"p{point.index:02d}{tag}-{casename.parse(point.case_name).slug}"
        candidate, n = self.ctx.run_dir / base, 2
        while candidate.exists():
            candidate, n = self.ctx.run_dir / f"{base}-r{n}", n + 1
        return candidate

    @staticmethod
    def hash_of(case: CasePlan) -> str:
        return workload_hash(resolved_workload(case.name, case.workload))

    def needs_running(self, planned: list[Planned]) -> list[CasePlan]:
        if self.ctx.options.max_batch:
            return [p.case for p in planned if p.case is not None]
        return [p.case for p in planned if p.case is not None and self.hash_of(p.case) not in self.done]

    # ------------------------------------------------------------ running

    def run_all(self, planned: list[Planned], execution: Optional[Execution]) -> None:
        """Every point in order; ``execution``: the preflighted hosts the points run on (None: nothing is left
        to run, every point done before or skipped)."""
        if execution is not None:
            self.executor = execution.executor()
        with self.stop:
            self._run_points(planned)

    def _run_points(self, planned: list[Planned]) -> None:
        for item in planned:
            if item.skipped is not None:
                self.progress.point_started(item.point)
                self._add(item.skipped)
            elif self.ctx.options.max_batch:
                self.search(item.point)
            else:
                self._add(self.attempt(item.point, item.case))

    def attempt(self, point: Point, case: Optional[CasePlan] = None, tag: str = "", extra: tuple = ()) -> Row:
        """One point: its finished round from before, or run now (planned again: a fresh port). A Ctrl-C
        records the interrupted round's row, then goes on up."""
        first = Planned(point, case) if case is not None else self.plan(point, extra, tag)
        if first.skipped is not None:
            return first.skipped
        whash, labels = self.hash_of(first.case), point.labels
        if whash in self.done:
            self.progress.point_started(point, "  (done before: kept)")
            return Row.from_document(point.index, labels, self.done[whash], whash)
        self.stop.check()  # a first Ctrl-C came while the last point ran: stop before this one
        fresh = self.plan(point, extra, tag)
        if fresh.skipped is not None:
            return fresh.skipped
        self.progress.point_started(point)
        results = self.executor.results
        already = len(results)
        try:
            for rnd in fresh.case.rounds:
                self.executor.run(fresh.case, rnd)
        except KeyboardInterrupt:
            mine = results[already:]
            row = _row_of(point.index, labels, fresh.case, mine[-1], whash) if mine else \
                Row(point.index, labels, point.case_name, "interrupted", "stopped by a signal", whash)
            row.search = "tried" if tag else None
            self._add(row)
            raise
        mine = results[already:]
        failed = next((r for r in mine if r.status != "ok"), mine[-1])  # a point is ok when all its rounds are
        return _row_of(point.index, labels, fresh.case, failed, whash)

    def search(self, point: Point) -> None:
        """--max-batch: each size tried is a row; the largest that fits is marked."""
        self.progress.point_started(point, "  (max-batch search)")
        rows: dict[int, Row] = {}

        def try_size(size: int) -> str:
            labelled = point.model_copy(update={"labels": {**point.labels, "micro_batch_size": str(size)}})
            row = self.attempt(labelled, tag=f"-mb{size}", extra=(assignment("train.micro_batch_size", size),))
            row.search = "tried"
            rows[size] = row
            self._add(row, counted=False)
            return row.status

        found = search_max_batch(try_size, self.ctx.options.max_batch_limit)
        if found.largest is not None:
            rows[found.largest].search = "largest"
        why = found.stopped or (f"largest micro batch that fits: {found.largest}" if found.largest
                                else "micro batch 1 does not fit")
        status = "ok" if found.largest and found.complete else (found.tried[-1][1] if found.tried else "skipped")
        self.progress.point_finished(Row(point.index, point.labels, point.case_name, status, why,
                                         micro_batch_size=found.largest))
        save(self.ctx.run_dir, self.ctx.options, self.ctx.rows)

    def _add(self, row: Row, counted: bool = True) -> None:
        self.ctx.rows.append(row)
        save(self.ctx.run_dir, self.ctx.options, self.ctx.rows)
        self.progress.point_finished(row, counted)


def _row_of(index: int, labels: dict, case: CasePlan, result: RoundResult, whash: str) -> Row:
    """The row from the round's results.json (what a resume reads back), else from the result in memory."""
    try:
        doc = json.loads((result.dir / "results.json").read_text(encoding="utf-8"))
        return Row.from_document(index, labels, doc, whash)
    except (OSError, ValueError, KeyError):
        return Row(index, labels, str(case.name), result.status, result.reason, whash, case.name.world_size,
                   case.workload.train.micro_batch_size, results_path=str(result.dir / "results.json"))


def world_of(point: Point) -> Optional[int]:
    try:
        return casename.parse(point.case_name).world_size
    except UserError:
        return None


def pending_rows(points: list[Point], rows: list[Row]) -> list[Row]:
    """Points the sweep did not reach (it was interrupted): rows too, so the table shows what is left."""
    reached = {r.point for r in rows}
    return [Row(p.index, p.labels, p.case_name, "pending", "not run yet: resume the sweep") for p in points
            if p.index not in reached]

"""Read what the workers left: perf records from each rank's stdout, error lines from stderr.

Files are streamed (worker_logs/perf_reader.py), so a long run's logs never sit in memory whole.
"""
from __future__ import annotations

import multiprocessing
import os
import re
import math
from array import array
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from training.contract import perflog

from run_benchmarks.results.worker_logs import perf_reader
# re-exported: readers name them here
from run_benchmarks.results.worker_logs.rank_files import RankLogs, gathered  # noqa: F401

ERROR_TAIL_LINES = 12
_ROOT_CAUSE_RANK = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)", re.DOTALL)
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")  # torch prefixes each stderr line of a worker
# Errors a rank raises because another rank died first: its peer vanished mid-collective. When ranks on
# several nodes fail, each node's launcher names its own rank as the root cause; these are the echoes.
_PEER_FAILURE = re.compile(r"Connection reset by peer|Connection closed by peer|remote process exited|"
                           r"NCCL communicator was aborted|ProcessGroupNCCL.*(?:abort|timeout)|Broken pipe",
                           re.IGNORECASE)


class StepSeries:
    """One rank's measured steps as columns (8 bytes a field a step), never as record objects, so a long
    run's analysis needs memory for its step count, not for its logs. Warm-up steps are only counted."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.times = array("d")
        self.tokens = array("d")
        self.effective = array("d")  # kept only while every step carries it
        self.flops = array("d")
        self.has_effective = self.has_flops = True
        self.warmup = 0
        self.first_step_time_s: Optional[float] = None  # step 0 (warm-up or not): compile, allocator
        self.loss_first: Optional[float] = None
        self.loss_last: Optional[float] = None
        self.loss_steps, self.losses = array("q"), array("d")  # every step's loss, warm-up included (references)
        # The wall-clock span of the measured steps (ended_at - step_time_s of the first, ended_at of the last),
        # where the worker reported ended_at: the window the monitor's figures are read over.
        self.window: Optional[tuple[float, float]] = None

    def __len__(self) -> int:  # every step reported, warm-up included
        return self.warmup + len(self.steps)

    def _widen(self, began: float, ended: float) -> None:
        if math.isfinite(began) and math.isfinite(ended) and began <= ended:
            self.window = (began, ended) if self.window is None else \
                (min(self.window[0], began), max(self.window[1], ended))

    def add(self, step: int, warmup: bool, step_time_s: float, tokens: float, loss: float,
            effective_tokens: Optional[float] = None, flops: Optional[float] = None,
            grad_norm: Optional[float] = None, ended_at: Optional[float] = None) -> None:
        # Convert before touching any column, so a malformed record leaves the columns aligned.
        step, step_time_s, tokens, loss = int(step), float(step_time_s), float(tokens), float(loss)
        ended_at = None if ended_at is None else float(ended_at)
        if self.loss_first is None:
            self.loss_first, self.first_step_time_s = loss, step_time_s
        self.loss_last = loss
        self.loss_steps.append(step)
        self.losses.append(loss)
        if warmup:
            self.warmup += 1
            return
        if ended_at is not None:
            self._widen(ended_at - step_time_s, ended_at)
        self.steps.append(step)
        self.times.append(step_time_s)
        self.tokens.append(tokens)
        if self.has_effective:
            if effective_tokens is None:
                self.has_effective, self.effective = False, array("d")
            else:
                self.effective.append(effective_tokens)
        if self.has_flops:
            if flops is None:
                self.has_flops, self.flops = False, array("d")
            else:
                self.flops.append(flops)

    def add_record(self, r: perflog.StepRecord) -> None:
        self.add(r.step, r.warmup, r.step_time_s, r.tokens, r.loss, r.effective_tokens, r.flops, r.grad_norm,
                 r.ended_at)

    def extend(self, records: list[dict]) -> None:
        """Decoded step records, many at once: each column is built whole (at C speed, and atomically: a
        bad value raises before any column changes). KeyError/TypeError/ValueError: add them one by one."""
        measured = [r for r in records if not r["warmup"]]
        steps = array("q", [r["step"] for r in measured])
        times = array("d", [r["step_time_s"] for r in measured])
        tokens = array("d", [r["tokens"] for r in measured])
        losses = [float(records[0]["loss"]), float(records[-1]["loss"])] if records else []
        every_step, every_loss = array("q", [r["step"] for r in records]), array("d", [r["loss"] for r in records])
        effective = [r.get("effective_tokens") for r in measured] if self.has_effective else []
        flops = [r.get("flops") for r in measured] if self.has_flops else []
        effective = array("d", effective) if None not in effective else None
        flops = array("d", flops) if None not in flops else None
        ends = [(float(r["ended_at"]) - float(r["step_time_s"]), float(r["ended_at"]))
                for r in measured if r.get("ended_at") is not None]
        if not records:
            return
        if self.loss_first is None:
            self.loss_first, self.first_step_time_s = losses[0], float(records[0]["step_time_s"])
        self.loss_last = losses[1]
        self.loss_steps.extend(every_step)
        self.losses.extend(every_loss)
        self.warmup += len(records) - len(measured)
        for began, ended in ends:
            self._widen(began, ended)
        self.steps.extend(steps)
        self.times.extend(times)
        self.tokens.extend(tokens)
        if effective is None:
            self.has_effective, self.effective = False, array("d")
        elif self.has_effective:
            self.effective.extend(effective)
        if flops is None:
            self.has_flops, self.flops = False, array("d")
        elif self.has_flops:
            self.flops.extend(flops)


@dataclass
class RankLog:
    rank: int
    logs: Optional[RankLogs] = None
    start: Optional[perflog.StartRecord] = None
    series: StepSeries = field(default_factory=StepSeries)
    end: Optional[perflog.EndRecord] = None
    unsupported: Optional[perflog.UnsupportedRecord] = None  # the device cannot run the case
    figures: list[perflog.FigureRecord] = field(default_factory=list)  # task figures beyond steps
    # where its step's time goes (training/breakdown.py): one record, or one per phase of a PPO update
    breakdowns: list[perflog.BreakdownRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def steps_done(self) -> int:
        return len(self.series)


def read_rank(logs: RankLogs) -> RankLog:
    """Stream a rank's stdout into its start and end records and its step columns."""
    out = RankLog(logs.rank, logs)
    if not logs.stdout.is_file():
        out.problems.append(f"no output from rank {logs.rank} ({logs.stdout} missing)")
        return out
    series, problems = out.series, out.problems
    for batch in perf_reader.read_batches(logs.stdout, problems):
        try:  # the hot path: a block of well-formed step records, with the odd start or end among them
            steps = [r for r in batch if r["kind"] == "step" and r["v"] == perflog.SCHEMA_VERSION]
            series.extend(steps)
            rest = [r for r in batch if r["kind"] != "step" or r["v"] != perflog.SCHEMA_VERSION] \
                if len(steps) < len(batch) else []
        except (KeyError, TypeError, ValueError):
            rest = batch  # one by one, so each bad record is named and the good ones kept
        for payload in rest:
            _add_one(out, payload)
    return out


PARALLEL_BYTES = 256 << 20  # below this, starting worker processes costs more than it saves


def read_ranks(all_logs: list[RankLogs]) -> Iterator[RankLog]:
    """``read_rank`` of each, in order. Large logs are decoded on every core, at most one rank per core in
    flight, so memory stays a few ranks' step columns whatever the number of ranks."""
    total = sum(logs.stdout.stat().st_size for logs in all_logs if logs.stdout.is_file())
    workers = min(len(all_logs), os.cpu_count() or 1)
    if total < PARALLEL_BYTES or workers < 2:
        yield from map(read_rank, all_logs)
        return
    # spawn, not fork: the orchestrator holds SSH and Docker client threads that a fork would copy mid-call
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque = deque()
        for logs in all_logs:
            pending.append(pool.submit(read_rank, logs))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _add_one(out: RankLog, payload) -> None:
    try:
        record = perflog.from_payload(payload)
        if isinstance(record, perflog.StepRecord):
            out.series.add_record(record)
    except perflog.PerfLogError as exc:
        out.problems.append(f"{out.logs.stdout}: {exc}")
        return
    except (TypeError, ValueError) as exc:
        out.problems.append(f"{out.logs.stdout}: step record with a bad value, skipped: {exc}")
        return
    if isinstance(record, perflog.StartRecord):
        out.start = record
    elif isinstance(record, perflog.EndRecord):
        out.end = record
    elif isinstance(record, perflog.UnsupportedRecord):
        out.unsupported = record
    elif isinstance(record, perflog.FigureRecord):
        out.figures.append(record)
    elif isinstance(record, perflog.BreakdownRecord):
        out.breakdowns.append(record)


def tail(path: Path, lines: int) -> list[str]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in deque(f, maxlen=lines)]


def error_lines(ranks: list[RankLog], launcher_logs: list[Path]) -> list[str]:
    """The lines that say why a round failed: the root-cause rank's traceback, else any rank's."""
    root_causes = []
    for log in launcher_logs:
        text = "\n".join(tail(log, 400))
        root_causes += [int(m) for m in _ROOT_CAUSE_RANK.findall(text)]
    by_rank = {r.rank: r for r in ranks}
    ordered = [by_rank[r] for r in root_causes if r in by_rank]
    ordered += [r for r in ranks if not r.finished and r not in ordered]
    tracebacks = []
    for rank in ordered:
        if rank.logs is None:
            continue
        lines = [_RANK_PREFIX.sub("", line) for line in tail(rank.logs.stderr, 400)]
        starts = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
        if starts:
            block = [line for line in lines[starts[-1]:] if line.strip()]
            tracebacks.append([f"[rank {rank.rank}] {line}" for line in block[-ERROR_TAIL_LINES:]])
    if tracebacks:  # the first that is not an echo of another rank's death
        return next((t for t in tracebacks if not _PEER_FAILURE.search(t[-1])), tracebacks[0])
    for rank in ordered:
        if rank.logs is not None:
            lines = [_RANK_PREFIX.sub("", line) for line in tail(rank.logs.stderr, ERROR_TAIL_LINES)
                     if line.strip()]
            if lines:
                return [f"[rank {rank.rank}] {line}" for line in lines]
    for log in launcher_logs:
        lines = [line for line in tail(log, ERROR_TAIL_LINES) if line.strip()]
        if lines:
            return lines
    return []


def world_size_mismatch(ranks: list[RankLog], planned: int, layout: str) -> Optional[str]:
    """Why the ranks' own world sizes (each start record's, from its launcher's variables) are not the plan's
    ``planned`` (``layout``: how the plan made it), or None when every rank that started agrees. A mismatch means
    the launch did not start the layout the plan asked for: every per-rank share and global figure would be of
    another job than the one named."""
    reported: dict[int, list[int]] = {}
    for rank in ranks:
        if rank.start is not None and rank.start.world_size != planned:
            reported.setdefault(rank.start.world_size, []).append(rank.rank)
    if not reported:
        return None
    said = "; ".join(f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))} reported world_size {size}"
                     for size, r in sorted(reported.items()))
    return (f"the launch did not start the planned layout: {said}, but the plan asks for {planned} ({layout}); "
            "check the launcher's arguments and the hosts' rendezvous (every node must join the same job)")

"""Read what the workers left: perf records from each rank's stdout, error lines from stderr.

Files are streamed line by line, so a long run's logs never sit in memory whole.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from training import perflog

from .frameworks import RankLogs

ERROR_TAIL_LINES = 12
_ROOT_CAUSE_RANK = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)", re.DOTALL)
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")  # torch prefixes each stderr line of a worker
# Errors a rank raises because another rank died first: its peer vanished mid-collective. When ranks on
# several nodes fail, each node's launcher names its own rank as the root cause; these are the echoes.
_PEER_FAILURE = re.compile(r"Connection reset by peer|Connection closed by peer|remote process exited|"
                           r"NCCL communicator was aborted|ProcessGroupNCCL.*(?:abort|timeout)|Broken pipe",
                           re.IGNORECASE)


@dataclass
class RankLog:
    rank: int
    logs: Optional[RankLogs] = None
    start: Optional[perflog.StartRecord] = None
    steps: list[perflog.StepRecord] = field(default_factory=list)
    end: Optional[perflog.EndRecord] = None
    problems: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.end is not None


def read_rank(logs: RankLogs) -> RankLog:
    out = RankLog(logs.rank, logs)
    if not logs.stdout.is_file():
        out.problems.append(f"no output from rank {logs.rank} ({logs.stdout} missing)")
        return out
    with open(logs.stdout, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            try:
                record = perflog.parse_line(line)
            except perflog.PerfLogError as exc:
                out.problems.append(f"{logs.stdout}:{number}: {exc}")
                continue
            if isinstance(record, perflog.StepRecord):
                out.steps.append(record)
            elif isinstance(record, perflog.StartRecord):
                out.start = record
            elif isinstance(record, perflog.EndRecord):
                out.end = record
    return out


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

"""What a round came to: its status and why, the nodes' endings, its figures and the record written from them.
Schedulers return it, the run prints it, the store and results.json are written from its record."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from run_benchmarks.results.figures.analyze import RoundMetrics
from run_benchmarks.results.rounds.record import RoundRecord


@dataclass
class RoundResult:
    case_name: str
    round: int
    dir: Path
    status: str  # ok | failed | oom | unsupported | timeout | interrupted
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)
    metrics: Optional[RoundMetrics] = None
    exit_codes: dict[int, Optional[int]] = field(default_factory=dict)
    endings: dict[int, str] = field(default_factory=dict)  # node rank -> why it ended, where the code misleads
    steps_completed: int = 0
    nodes: list[dict] = field(default_factory=list)
    started_at: str = ""
    ended_at: str = ""
    wall_time_s: Optional[float] = None  # end to end: nodes started -> logs collected and analysed
    monitor: Optional[dict] = None  # monitoring.summarize_round: utilisation, power, energy per device
    figures: list[dict] = field(default_factory=list)  # task figures (figures.task.round_figures), e.g. PPO phases
    write_error: Optional[OSError] = None  # results.json could not be written (disk full): the run stops
    rendezvous: dict = field(default_factory=dict)  # the master port the round's launchers met on, and who chose it
    record: Optional[RoundRecord] = None  # what results.json, summary.json and the store were written from
    leftovers: list[dict] = field(default_factory=list)  # other runs' processes found at the start (their pids)

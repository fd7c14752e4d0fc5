"""Versioned parsers for logs other tools write, so their results can sit beside accelbench's.

A parser is registered under ``<format>/<version>``; ``accelbench import --format paddlenlp`` takes
the newest version of a format, ``paddlenlp/1`` pins one. Each reads one log file into an
``Imported``: the same figure names as accelbench's own metrics (so reports and comparisons treat
both alike), a status, and what the log says about where it ran.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..errors import UserError
from ..record import CaseFacts, Environment, RoundRecord, Status

if TYPE_CHECKING:
    from ..casename import CaseName


@dataclass
class Imported:
    status: str  # ok | failed
    # RoundMetrics names (tokens_per_s_per_device, samples_per_s, peak_memory_bytes {max},
    # peak_memory_reserved_bytes {max}, ...), plus what only imports carry: time_to_train_s, eval_accuracy,
    # and a tool's own FLOP counts as tflops_per_device_logged / mfu_logged (case_facts.complete adds ours)
    metrics: dict
    reason: str = ""
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    wall_time_s: Optional[float] = None
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # whatever else the log states (platform, benchmark, ...)

    def record(self, run_id: str, name: "CaseName", index: int, vendor: Optional[str],
               extern_config: Optional[str], path: Path, parser: str) -> RoundRecord:
        """The imported log as a round record, like a run's: what ran comes from the case name given."""
        where = str(Path(path).resolve())
        return RoundRecord(
            run_id=run_id, case_name=str(name), round=index, status=Status(self.status), reason=self.reason,
            case=CaseFacts(case=name.case, framework=name.framework, framework_version=name.framework_version,
                           hardware=name.hardware, vendor=vendor, nnodes=name.nnodes,
                           nprocs_per_node=name.nprocs_per_node, world_size=name.world_size, repeat=name.repeat,
                           extern_config=extern_config),
            started_at=self.started_at, ended_at=self.ended_at, wall_time_s=self.wall_time_s,
            metrics=self.metrics, warnings=self.warnings, results_path=where, source=f"import:{parser}",
            environment=Environment(imported_from=where, **self.details))


@dataclass(frozen=True)
class Parser:
    format: str
    version: int
    description: str
    parse: Callable[..., Imported]  # (path, world_size, skip_intervals) -> Imported

    @property
    def name(self) -> str:
        return f"{self.format}/{self.version}"


PARSERS: dict[str, Parser] = {}


def line_log_result(world_size: int, intervals: int, skipped: int, stamps: list, error: str) -> Imported:
    """What every line-based log gives before its figures: when it ran (its first and last time stamps) and
    whether it ends in an error (then the import is ``failed``, whatever figures came before)."""
    result = Imported(status="ok", metrics={"world_size": world_size},
                      details={"intervals": intervals, "skipped": skipped})
    if stamps:
        result.started_at, result.ended_at = stamps[0].isoformat(), stamps[-1].isoformat()
        result.wall_time_s = (stamps[-1] - stamps[0]).total_seconds()
    if error:
        result.status, result.reason = "failed", f"the log ends in an error: {error}"
    return result


def register(format: str, version: int, description: str):
    def wrap(fn: Callable[..., Imported]) -> Callable[..., Imported]:
        parser = Parser(format, version, description, fn)
        PARSERS[parser.name] = parser
        return fn
    return wrap


def get(name: str) -> Parser:
    load_builtin()
    if name in PARSERS:
        return PARSERS[name]
    versions = [p for p in PARSERS.values() if p.format == name]
    if versions:
        return max(versions, key=lambda p: p.version)
    raise UserError(f"no log parser {name!r}",
                    f"use one of: {', '.join(sorted(PARSERS))} (or the format alone for its newest version)")


def read_lines(path: Path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield from f
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None


def load_builtin() -> None:
    """Import the parser modules shipped here (each registers itself)."""
    for module in ("megatron", "mllog", "paddlenlp", "torchtitan"):
        importlib.import_module(f"{__name__}.{module}")

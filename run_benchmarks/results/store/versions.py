"""A stored attempts row read as the version it was written with, then migrated forward to today's row.

Each row names the row version that wrote it (column ``row_version``, since version 6); a row without one was
written before rows carried it (versions 1 to 5, one file may hold several) and is read as version 1: checked
by the rules of the columns every version holds, then taken through every named change below, each of which
leaves a row that already has what it adds as it is. A row from a newer accelbench is refused, never guessed;
a row that does not fit its version's rules is refused with the column that is wrong, never emptied.

The changes, oldest first (``ROW_MIGRATIONS``): each is (the version it makes, the change, its date and
commit, the function). The workload inside a row is the worker contract's document and has its own named
migrations where it is read as a ``WorkloadSpec`` (report/facts.WORKLOAD_MIGRATIONS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, create_model, field_validator

from run_benchmarks.errors import UserError
from run_benchmarks.results.rounds.metrics_shape import checked
from run_benchmarks.results.rounds.record import RoundRecord
from run_benchmarks.results.store.schema import (CASE_COLUMNS, METRIC_COLUMNS, MONITOR_COLUMNS, ROW_VERSION,
                                                 Attempt)


class RowV1(BaseModel):
    """The columns of the first store (2026-11-23, a5c5f95), which every later version keeps: the rules an
    unversioned row is read by. Columns added later are read by the change that added them."""

    model_config = ConfigDict(extra="allow", strict=True)

    id: Optional[int] = None  # None: a row not yet stored (a bundle's)
    run_id: str
    case_name: str
    case: str
    framework: str
    framework_version: Optional[str] = None
    hardware: str
    vendor: Optional[str] = None
    nnodes: int
    nprocs_per_node: int
    world_size: int
    repeat: Optional[int] = None
    extern_config: Optional[str] = None
    extern_config_hash: Optional[str] = None
    round: int
    attempt: int = 1
    status: str
    reason: Optional[str] = None
    precision: Optional[str] = None
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    wall_time_s: Optional[float] = None
    metrics: Optional[dict[str, Any]] = None
    workload: Optional[dict[str, Any]] = None
    environment: Optional[dict[str, Any]] = None
    warnings: Optional[list[str]] = None
    error_lines: Optional[list[str]] = None
    accelbench_commit: Optional[str] = None
    results_path: Optional[str] = None
    source: str

    @field_validator("metrics")
    @classmethod
    def _views_can_read(cls, metrics: Optional[dict]) -> Optional[dict]:
        """Every version's figures and time breakdown have the shape views read (results/rounds/metrics_shape.py)."""
        return checked(metrics)


class _Today(RowV1):
    model_config = ConfigDict(extra="forbid", strict=True)

    monitor: Optional[dict[str, Any]] = None
    figures: Optional[list[dict[str, Any]]] = None
    record: dict[str, Any]
    row_version: int


# Today's row (version ROW_VERSION): every column, typed, the figure columns from schema's lists; nothing else.
AttemptRow = create_model("AttemptRow", __base__=_Today,
                          **{c: (Optional[float], None) for c in (*(c for c, _, _ in METRIC_COLUMNS), *MONITOR_COLUMNS)})


def _monitor_columns(row: dict) -> dict:
    """Monitors: the utilisation, power, energy and device memory columns and the ``monitor`` summary (none
    before: no monitors ran)."""
    return {**{c: None for c in (*MONITOR_COLUMNS, "monitor")}, **row}


def _reserved_memory(row: dict) -> dict:
    """peak_memory_reserved_bytes beside the allocated peak (not measured before)."""
    return {"peak_memory_reserved_bytes": None, **row}


def _task_figures(row: dict) -> dict:
    """Task figures (PPO phases, micro-benchmarks) as a ``figures`` list (none before)."""
    return {"figures": None, **row}


def _record_whole(row: dict) -> dict:
    """The round record stored whole (``record``); before, the columns held all of it: rebuilt from them."""
    if row.get("record"):
        return row
    record = {
        "run_id": row["run_id"], "case_name": row["case_name"],
        "case": {k: row[k] for k in CASE_COLUMNS if k != "case_name" and row.get(k) is not None},
        "round": row["round"],
        "status": row["status"], "reason": row.get("reason") or "", "warnings": row.get("warnings") or [],
        "error_lines": row.get("error_lines") or [], "started_at": row.get("started_at"),
        "ended_at": row.get("ended_at"), "wall_time_s": row.get("wall_time_s"),
        "results_path": row.get("results_path"), "metrics": row.get("metrics"), "monitor": row.get("monitor"),
        "figures": row.get("figures") or [], "workload": row.get("workload"),
        "environment": row.get("environment") or {}, "source": row.get("source") or "accelbench"}
    return {**row, "record": record}


def _row_version(row: dict) -> dict:
    """Each row names the row version that wrote it (``row_version``): the version it now has."""
    return {**row, "row_version": 6}


def _compliance(row: dict) -> dict:
    """The record may carry the policy verdict (``record.compliance``) and what a device was
    (``record.device_definition``); rows before them were not judged and said nothing of their devices, which
    their record says by having neither: only the version it now has."""
    return {**row, "row_version": 7}


@dataclass(frozen=True)
class RowMigration:
    to_version: int
    change: str
    since: str  # the date and commit that made the change
    migrate: Callable[[dict], dict]


ROW_MIGRATIONS = (
    RowMigration(2, "monitor columns and summary added", "2026-11-23 dfc3ca8", _monitor_columns),
    RowMigration(3, "peak_memory_reserved_bytes added", "2026-11-23 e259435", _reserved_memory),
    RowMigration(4, "figures added", "2026-11-24 c02cc4f", _task_figures),
    RowMigration(5, "record: the round record stored whole", "2026-11-25 a2793ac", _record_whole),
    RowMigration(6, "row_version: each row names its version", "2026-11-25", _row_version),
    RowMigration(7, "record.compliance and record.device_definition: the workload against its case's policy, "
                    "what one device was", "2026-11-26 (this change)",
                 _compliance),
)
assert [m.to_version for m in ROW_MIGRATIONS] == list(range(2, ROW_VERSION + 1))


class StoredRowError(UserError):
    """A stored row that this accelbench cannot read: not fitting its own version's rules."""


class NewerRowError(StoredRowError):
    """A stored row written by a newer accelbench: the fix is an upgrade, whatever holds the row."""


def _where(raw: dict, origin: str) -> str:
    ident = f"row {raw['id']}" if isinstance(raw.get("id"), int) else "a row"
    return f"{origin}: {ident} (run {str(raw.get('run_id'))[:80]}, round {str(raw.get('round'))[:20]})"


def _refuse(raw: dict, origin: str, version: Any, exc: ValidationError, within: str = "") -> StoredRowError:
    first = exc.errors()[0]
    key = within + (".".join(str(part) for part in first["loc"]) or "(the row)")
    return StoredRowError(f"{_where(raw, origin)}, row version {version}: {key}: "
                          f"{first['msg'].removeprefix('Value error, ')}"
                          + (f" ({len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""),
                          "the row was changed outside accelbench: correct or delete it (sqlite3), then add the "
                          "round again from its results.json with: accelbench store repair")


def row_version(raw: dict, origin: str) -> int:
    """The version ``raw`` was written with: 1 when it names none; refused when newer than this accelbench."""
    version = raw.get("row_version")
    if version is None:
        return 1
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoredRowError(f"{_where(raw, origin)}: row_version {str(version)[:20]!r} is not a version",
                             "the row was changed outside accelbench: correct or delete it (sqlite3)")
    if version > ROW_VERSION:
        raise NewerRowError(f"{_where(raw, origin)} was written by a newer accelbench (row version {version}; "
                             f"this one reads versions 1 to {ROW_VERSION})",
                             "upgrade accelbench (git pull in its checkout, then reinstall) "
                             "to read it")
    return version


def read_row(raw: dict, origin: str = "results store") -> Attempt:
    """``raw``: a stored row, JSON columns decoded. Checked once by its own version's rules, migrated forward
    by the named changes, then read as today's row and its round record."""
    version = row_version(raw, origin)
    row = {k: v for k, v in raw.items() if not (v is None and k not in AttemptRow.model_fields)}
    try:
        (AttemptRow if version == ROW_VERSION else RowV1).model_validate(row)
    except ValidationError as exc:
        raise _refuse(raw, origin, version, exc) from None
    applied = []
    for step in ROW_MIGRATIONS:
        if step.to_version > version:
            row = step.migrate(row)
            applied.append(step.change)
    if applied:
        try:
            AttemptRow.model_validate(row)
        except ValidationError as exc:
            raise _refuse(raw, origin, version, exc) from None
    try:
        record = RoundRecord.model_validate(row["record"])
    except ValidationError as exc:
        raise _refuse(raw, origin, version, exc, "record.") from None
    return Attempt(row, version=version, migrations=tuple(applied), typed=record)

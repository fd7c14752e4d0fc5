"""What a sweep keeps in its run folder: ``sweep.json`` (its points, options and rows) and which points are
done, found from the rounds' own ``results.json`` by the resolved-workload hash.

``done_points`` is the one place that knows where finished rounds are looked up; when the results store
holds the workload hash of every attempt it can ask the store instead, and nothing else changes.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, ValidationError

from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName
from run_benchmarks.catalog.config import Strict
from run_benchmarks.errors import UserError
from run_benchmarks.sweep.grid import Point, ScalingSpec
from run_benchmarks.results.figures import memory
from run_benchmarks.results.store.schema import with_columns
from run_benchmarks.results.rounds.workload import resolved_workload, workload_hash

STATE_FILE = "sweep.json"
# A round that ended one of these ways is a result: resume does not run its point again.
DONE_STATUSES = ("ok", "oom", "failed", "unsupported", "timeout")


class SweepOptions(Strict):
    """How the sweep was asked for: enough to resume it without the command line."""

    points: list[Point]
    axes: list[str]
    max_batch: bool = False
    max_batch_limit: int = Field(1024, ge=1)
    scaling: Optional[ScalingSpec] = None
    timeout_s: Optional[float] = None
    allow_version_mismatch: bool = False
    table: Optional[str] = None  # the sweep file's reference table, printed by show (and --show) from the store


@dataclass
class Row:
    """One line of the sweep's table: a grid point, or one size a max-batch search tried."""

    point: int
    labels: dict[str, str]
    case_name: str
    status: str  # ok | oom | failed | unsupported | timeout | skipped | interrupted | pending
    reason: str = ""
    workload_hash: Optional[str] = None
    world_size: Optional[int] = None
    micro_batch_size: Optional[int] = None
    tokens_per_s_per_device: Optional[float] = None
    tokens_per_s_total: Optional[float] = None
    peak_memory_bytes: Optional[float] = None  # the round's memory figure as every view shows it (figures/memory.py)
    memory_kind: Optional[str] = None  # its name: device in use, reserved, allocated, rss
    mfu: Optional[float] = None
    results_path: Optional[str] = None
    search: Optional[str] = None  # max-batch: "tried" or "largest" (the largest size that fits)
    extra: dict[str, Any] = field(default_factory=dict)
    step_time_s: Optional[float] = None  # the round's median step time (warm-up excluded); None in older sweeps
    tflops_per_device: Optional[float] = None

    @classmethod
    def from_document(cls, point: int, labels: dict[str, str], doc: dict, whash: str) -> "Row":
        m = doc.get("metrics") or {}
        # the memory figure every view shows for the round, named (results/figures/memory.py), from its stored columns
        shown = memory.headline(with_columns({"metrics": m, "monitor": doc.get("monitor")}).get, m.get("memory_kind"))
        return cls(point, labels, doc["case_name"], doc["status"], doc.get("reason") or "", whash,
                   doc["case"]["world_size"], doc["workload"]["train"]["micro_batch_size"],
                   m.get("tokens_per_s_per_device"), m.get("tokens_per_s_total"), shown and shown.value,
                   shown.name if shown else m.get("memory_kind"),
                   m.get("mfu"), doc.get("results_path"), step_time_s=(m.get("step_time_s") or {}).get("median"),
                   tflops_per_device=m.get("tflops_per_device"))


def hash_of_document(doc: dict) -> str:
    c = doc["case"]
    name = CaseName(c["case"], c["framework"], c["framework_version"], c["hardware"], c["nnodes"],
                    c["nprocs_per_node"], c.get("repeat", 1))
    return workload_hash(resolved_workload(name, WorkloadSpec.model_validate(doc["workload"])))


def done_points(run_dir: Path) -> dict[str, dict]:
    """Workload hash -> the latest finished round's results.json in this run (interrupted ones and attempts
    set aside to be retried do not count). To switch to the store: one query for the run's done hashes."""
    done: dict[str, tuple[float, dict]] = {}
    for path in run_dir.glob("*/round*/results.json"):
        if ".start-error" in path.parent.name:
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("status") not in DONE_STATUSES:
                continue
            whash, when = hash_of_document(doc), path.stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            continue  # a half-written or foreign file: that point runs again
        if whash not in done or done[whash][0] < when:
            done[whash] = (when, doc)
    return {h: doc for h, (_, doc) in done.items()}


def save(run_dir: Path, options: SweepOptions, rows: list[Row]) -> None:
    """Written whole and renamed over the old one: a Ctrl-C never leaves half a file."""
    run_dir.mkdir(parents=True, exist_ok=True)
    data = {"schema": "accelbench.sweep/1", "options": options.model_dump(mode="json"),
            "rows": [asdict(r) for r in rows]}
    tmp = run_dir / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, run_dir / STATE_FILE)


def load(run_dir: Path) -> tuple[SweepOptions, list[Row]]:
    path = run_dir / STATE_FILE
    if not path.is_file():
        raise UserError(f"{run_dir} holds no sweep ({STATE_FILE} not found)",
                        "name a run that `accelbench sweep` started (its folder under the log root); "
                        "give --log-root if it is not the default")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SweepOptions.model_validate(data["options"]), [Row(**r) for r in data["rows"]]
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise UserError(f"{path}: not a sweep file this accelbench reads ({type(exc).__name__})",
                        "resume it with the accelbench version that started it, or start the sweep again") from None

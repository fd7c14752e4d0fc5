"""The round record: one typed, versioned document per round (per imported log), whatever produced it.

A run's rounds (``outcome``) and the importers build a ``RoundRecord``; it is written whole to the
round's results.json, stored whole in the results store (column ``record``) with the columns derived
from it (``to_row``), and read back from either (``RoundRecord.model_validate``) by ``show``, ``store
repair`` and bundles. A document that does not fit is refused where it is read, with the key that is
wrong, instead of being read three ways by three readers.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from run_benchmarks.results.rounds.metrics_shape import checked

from training.contract.tasks import task_of

from run_benchmarks.catalog.compliance import Compliance

RESULTS_SCHEMA = "accelbench.results/1"


class Status(str, Enum):
    ok = "ok"
    failed = "failed"
    oom = "oom"
    unsupported = "unsupported"
    timeout = "timeout"
    interrupted = "interrupted"
    start_error = "start_error"  # an attempt whose ranks never met; the round was run again


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseFacts(_Record):
    """What the case name and its configs said ran."""

    case: str
    framework: str
    framework_version: Optional[str] = None
    hardware: str
    vendor: Optional[str] = None
    nnodes: int = Field(ge=1)
    nprocs_per_node: int = Field(ge=1)
    world_size: int = Field(ge=1)
    repeat: int = Field(1, ge=1)
    extern_config: Optional[str] = None
    extern_config_hash: Optional[str] = None


class FigureEntry(_Record):
    """A task figure of the round (figures.task.Figure): a PPO phase's throughput, a GEMM's TFLOP/s at a size."""

    name: str
    value: float
    unit: str
    better: str = "higher"
    params: Optional[dict[str, Any]] = None
    formula: Optional[str] = None
    ranks: int = 1


class Environment(BaseModel):
    """Where it ran: the orchestrator and each node (host, image, probes, devices, versions); an import
    says which file it came from and what the log stated."""

    model_config = ConfigDict(extra="allow")

    orchestrator: dict[str, Any] = Field(default_factory=dict)
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    rendezvous: dict[str, Any] = Field(default_factory=dict, description=(
        "master_port: the port the round's launchers met on (master_port auto: chosen on the master host when "
        "the round started), chosen_by: who chose it; empty where no launcher needed one"))


class DeviceDefinition(_Record):
    """What one device (one rank's, what every per-device figure divides by) was, as the vendor file stated it
    (catalog/fairness.py): reports say it beside the per-device figures."""

    hardware: str
    dies_per_device: Optional[int] = Field(None, ge=1, description="None: the vendor file did not state it")
    devices_per_card: int = Field(1, ge=1)
    stated_in: str = ""

    def words(self) -> str:
        from run_benchmarks.catalog.fairness import device_words

        return device_words(self.hardware, self.dies_per_device, self.devices_per_card) + \
            (f" ({self.stated_in})" if self.stated_in else "")


class RoundRecord(_Record):
    schema_: Literal["accelbench.results/1"] = Field(RESULTS_SCHEMA, alias="schema")
    run_id: str
    case_name: str
    case: CaseFacts
    round: int = Field(ge=1)
    status: Status
    reason: str = ""
    warnings: list[str] = Field(default_factory=list)
    error_lines: list[str] = Field(default_factory=list)
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    wall_time_s: Optional[float] = None
    results_path: Optional[str] = None
    steps_completed: int = 0
    metrics: Optional[dict[str, Any]] = Field(None, description="analyze.RoundMetrics.to_dict() for runs; the "
                                                                "figures a log gave, by the same names, for imports")
    monitor: Optional[dict[str, Any]] = None
    figures: list[FigureEntry] = Field(default_factory=list)
    workload: Optional[dict[str, Any]] = Field(None, description="the resolved workload the worker was handed")
    workload_hash: Optional[str] = Field(None, description="workload.workload_hash of it: what groups rounds")
    environment: Environment = Field(default_factory=Environment)
    source: str = Field("accelbench", description="accelbench, or import:<parser>/<version>")
    compliance: Optional[Compliance] = Field(None, description="the workload against its case's policy "
                                             "(catalog/compliance.py); None: not judged (an import, an older run)")
    device_definition: Optional[DeviceDefinition] = Field(None, description="what one device was; None: an "
                                                          "import, an older run, or the CPU")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("metrics")
    @classmethod
    def _views_can_read(cls, metrics: Optional[dict]) -> Optional[dict]:
        """The figures and the time breakdown in the shape views read (metrics_shape): a record from a bundle,
        a results.json or an edited row with another shape is refused where it is read, with the key."""
        return checked(metrics)

    def document(self) -> dict:
        """As results.json holds it."""
        return self.model_dump(mode="json", by_alias=True)

    def precision(self) -> Optional[str]:
        """The precision the round computed in: the GEMM micro-benchmark's own dtypes (``bf16+fp16``), not the
        training default its workload also carries (an H200 report read ``fp32`` for a bf16/fp16 GEMM run);
        the other micro-benchmarks move fp32 buffers."""
        workload = self.workload or {}
        micro = workload.get("micro") or {}
        if not task_of(workload.get("task") or "pretrain").trains:
            return "+".join(dict.fromkeys(micro.get("dtypes") or ["fp32"])) if micro.get("bench") == "gemm" else "fp32"
        return (workload.get("train") or {}).get("precision") or (self.metrics or {}).get("precision")

    def to_row(self, attempt: int = 1) -> dict:
        """The store's row: the record whole, and the columns derived from it (filters, sorting)."""
        case = self.case.model_dump()
        return {
            "run_id": self.run_id, **case, "case_name": self.case_name, "round": self.round, "attempt": attempt,
            "status": self.status.value, "reason": self.reason, "started_at": self.started_at,
            "ended_at": self.ended_at, "wall_time_s": self.wall_time_s, "metrics": self.metrics,
            "monitor": self.monitor, "figures": [f.model_dump() for f in self.figures] or None,
            "workload": self.workload, "environment": self.environment.model_dump(),
            "warnings": list(self.warnings), "error_lines": list(self.error_lines),
            "accelbench_commit": self.environment.orchestrator.get("accelbench_commit"),
            "results_path": self.results_path, "source": self.source,
            "precision": self.precision(),
            "record": self.document(),
        }

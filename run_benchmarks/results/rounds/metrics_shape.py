"""The shape a round's ``metrics`` must have where views read it: the figures as numbers, and
``time_breakdown`` as breakdown/step.py, breakdown/pipeline.py and breakdown/ppo.py write it (issue 43).

A record is read from a results.json or a bundle someone else wrote, or from a store row anyone can edit, and the
views (show, report in every format, compare, the HTML charts) format and add these values. So a record is
checked against this shape wherever it is read as one (``RoundRecord``, and the row's ``metrics`` column in
store/versions.py): a received bundle whose breakdown is a string, a list, has no ``measured`` or is ``null`` in
the wrong place is refused on import with the key that is wrong, and a stored row so changed is refused when
read. ``breakdown_of`` is how a view takes a breakdown: only one of this shape, else none.

The models are open (``extra="allow"``): a key a newer accelbench adds passes; every key a view reads is typed
(strict: a number is an int or a float, never a string or a bool), and the keys it reads unconditionally are
required where their part is present.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

Num = Optional[float]  # strict: an int or a float (nan and inf pass: the figure checks judge values)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class RankRow(_Open):
    rank: int
    data_s: float
    compute_s: float
    wait_s: float
    communication_s: float
    optimizer_s: float
    other_s: Num = None
    step_s: Num = None
    pipeline_wait_s: Num = None
    compute_parts: Optional[dict[str, float]] = None
    stages: Optional[list[int]] = None


class Straggler(_Open):
    rank: int
    compute_s: float
    median_compute_s: float
    stages: Optional[list[int]] = None


class Pipeline(_Open):
    schedule: Optional[str] = None
    ranks: Optional[int] = None
    stages: Optional[int] = None
    micro_batches: Optional[int] = None
    sends: int
    send_bytes: int
    slowest_rank: Optional[int] = None
    slowest_sends: int
    slowest_send_bytes: int


class Measured(_Open):
    """Either ``not_measured`` (why), or the parts of the serialised step."""

    not_measured: Optional[str] = None
    compute_s: Num = None
    communication_s: Num = None
    other_s: Num = None
    pipeline_wait_s: Num = None
    serialised_step_s: Num = None
    step_time_s: Num = None
    waiting_fraction: Num = None
    breakdown_steps: Optional[int] = None
    collectives: Optional[int] = None
    gradient_bytes: Optional[int] = None
    bucket_bytes: Optional[list[int]] = None
    collective_ops: Optional[list[str]] = None
    group_size: Optional[int] = None
    group_sizes: Optional[list[int]] = None
    per_rank: Optional[list[RankRow]] = None
    straggler: Optional[Straggler] = None
    method: Optional[str] = None
    compute_parts: Optional[dict[str, float]] = None
    pipeline: Optional[Pipeline] = None

    @model_validator(mode="after")
    def _parts_when_measured(self) -> "Measured":
        if self.not_measured is None:
            absent = [k for k in ("compute_s", "communication_s", "other_s", "serialised_step_s", "breakdown_steps",
                                  "gradient_bytes") if getattr(self, k) is None]
            if absent:
                raise ValueError(f"a measured breakdown without {', '.join(absent)} (nor not_measured)")
            if self.pipeline is not None and self.pipeline_wait_s is None:
                raise ValueError("a pipeline without pipeline_wait_s")
        return self


class P2pBusbw(_Open):
    send_bytes: int
    busbw_gbps: float
    measured_at_bytes: int
    source: str


class Expected(_Open):
    compute_s: Num = None
    compute_s_datasheet: Num = None
    communication_s: Num = None
    communication_formula: Optional[str] = None
    communication_note: Optional[str] = None
    compute_parts: Optional[dict[str, Num]] = None
    missing: Optional[list[str]] = None
    bubble_formula: Optional[str] = None
    bubble_fraction: Num = None
    bubble_s: Num = None
    p2p_s: Num = None
    p2p_rank: Optional[int] = None
    p2p_rank_sends: Optional[int] = None
    p2p_busbw: Optional[P2pBusbw] = None

    @model_validator(mode="after")
    def _bubble(self) -> "Expected":
        if self.bubble_formula is not None and self.bubble_fraction is None:
            raise ValueError("a bubble_formula without its bubble_fraction")
        return self


class Phase(_Open):
    label: str
    measured: Measured
    expected: Expected
    lever: Optional[str] = None


class Energy(_Open):
    energy_per_token_j: Num = None
    tokens_per_kwh: Num = None
    method: Optional[str] = None
    note: Optional[str] = None

    @model_validator(mode="after")
    def _said(self) -> "Energy":
        if self.energy_per_token_j is not None and self.tokens_per_kwh is None:
            raise ValueError("energy_per_token_j without tokens_per_kwh")
        if self.energy_per_token_j is None and self.note is None:
            raise ValueError("no energy_per_token_j and no note saying why")
        return self


class TimeBreakdown(_Open):
    measured: Measured
    expected: Expected
    lever: Optional[str] = None
    unit: Optional[str] = None
    phases: Optional[dict[str, Phase]] = None
    energy: Optional[Energy] = None


Stat = Union[float, dict[str, Num]]  # a figure, or its statistics over rounds/ranks (mean, median, min, max)


class Metrics(_Open):
    """The figures views format (schema.METRIC_COLUMNS and their companions), and the breakdown."""

    tokens_per_s_per_device: Num = None
    tokens_per_s_total: Num = None
    effective_tokens_per_s_per_device: Num = None
    samples_per_s: Num = None
    samples_per_step: Num = None
    tflops_per_device: Num = None
    mfu: Num = None
    memory_total_bytes: Num = None
    init_time_s: Num = None
    first_step_time_s: Num = None
    loss_last: Num = None
    world_size: Optional[int] = None
    peak_memory_bytes: Optional[Stat] = None
    peak_memory_reserved_bytes: Optional[Stat] = None
    step_time_s: Optional[Stat] = None
    time_breakdown: Optional[TimeBreakdown] = None


def shape_problem(metrics: Any) -> Optional[str]:
    """Why ``metrics`` does not have the shape views read (the first wrong key, dotted), or None."""
    if metrics is None:
        return None
    try:
        Metrics.model_validate(metrics)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the metrics)"
        more = f" ({len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        return f"{where}: {first['msg'].removeprefix('Value error, ')}{more}"
    return None


def checked(metrics: Any) -> Any:
    """``metrics`` as it is when it has the shape; a pydantic field validator's ValueError when not."""
    problem = shape_problem(metrics)
    if problem:
        raise ValueError(problem)
    return metrics


def breakdown_of(metrics: Any) -> Optional[dict]:
    """A round's ``time_breakdown`` for a view: the dict when it has the shape, else None (never a guess)."""
    tb = metrics.get("time_breakdown") if isinstance(metrics, dict) else None
    if tb is None:
        return None
    try:
        TimeBreakdown.model_validate(tb)
    except ValidationError:
        return None
    return tb

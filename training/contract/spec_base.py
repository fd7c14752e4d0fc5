"""What every part of the workload schema shares: strict frozen models, and bounds that say why."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


# Upper bounds, each far above any real model or benchmark and far below what would make a worker allocate
# without end or run for days: a typo (an extra digit, 1e30) fails at plan time instead. The reason travels
# with the field, so the orchestrator's error message can say it.
def bounded(default=..., *, le: int, why: str, **kwargs):
    return Field(default, le=le, json_schema_extra={"max_reason": why}, **kwargs)


WIDTH_REASON = "wider than any published model (GPT-3 175B: 12288); a typo would allocate without end"
STEPS_REASON = "a benchmark measures hundreds to thousands of steps; 10 million runs for days"


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

"""Task micro's place in the workload schema: a micro-benchmark measures the device, not a model.

The orchestrator's plan, terminal and reports read ``model`` and ``train`` of every workload, so a micro
workload gets a fixed stand-in for both (one step of a one-layer model of width 1) instead of making them
optional everywhere; no worker reads it (training/micro/case.py runs the ``micro`` section). A case that sets
either is refused, so the stand-in is never taken for a real setting.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

MICRO_STAND_IN = {"model": {"family": "none", "n_layer": 1, "n_head": 1, "d_model": 1, "vocab_size": 1, "seq_len": 1},
                  "train": {"micro_batch_size": 1, "steps": 1, "warmup_steps": 0}}


def _is_stand_in(spec: type[BaseModel], value: Any, stand_in: dict) -> bool:
    """Unset, or the stand-in itself (a resolved config read again, its defaults written out)."""
    if value in (None, {}):
        return True
    try:
        return spec.model_validate(value) == spec.model_validate(stand_in)
    except ValueError:
        return False


def with_stand_in(data: Any, model_spec: type[BaseModel], train_spec: type[BaseModel]) -> Any:
    """A micro workload's raw data with the stand-in model and train; anything else unchanged."""
    if not isinstance(data, dict) or data.get("task") != "micro":
        return data
    given = [key for key, spec in (("model", model_spec), ("train", train_spec))
             if not _is_stand_in(spec, data.get(key), MICRO_STAND_IN[key])]
    if given:
        raise ValueError(f"task micro trains no model: remove {' and '.join(given)} (the micro section sets the "
                         "sizes and iterations)")
    return {**data, **MICRO_STAND_IN}

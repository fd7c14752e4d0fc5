"""Fairness lint for a round's figures, said as warnings with the round (results.json, the store, ``show``):

- constant inputs: every micro-benchmark figure states its operands random with a seed
  (``params.inputs`` MICRO_INPUTS and ``params.seed``, training/micro); one that does not (a worker or a
  vendor's operations that fill all-ones or all-zeros operands, which run faster on some hardware, or do not
  say) is named: its figure is not comparable;
- token accounting: padding is never an effective token. Effective tokens above all tokens cannot be and fail
  the round (figures/impossible.py); an instruction-data round of batches of several samples whose effective
  tokens equal its padded tokens over every measured step is questioned: such batches nearly always pad some.
"""
from __future__ import annotations

from typing import Any, Optional

from training.contract.micro import MICRO_INPUTS
from training.contract.tasks import task_of

SIZED = ("bytes", "m")  # a figure measured at a size (a message, an array, a product) had operands


def micro_inputs(figures: list[dict]) -> list[str]:
    """One warning naming the micro-benchmark figures, measured at a size, whose params do not state random,
    seeded operands (figures derived from them, the best over sizes, carry no size and follow theirs)."""
    said: dict[str, set[str]] = {}
    for f in figures:
        params = f.get("params") or {}
        if any(k in params for k in SIZED) and not (params.get("inputs") == MICRO_INPUTS
                                                    and isinstance(params.get("seed"), int)):
            said.setdefault(str(params.get("inputs", "not stated"))[:40], set()).add(str(f.get("name", "?"))[:80])
    if not said:
        return []
    named = "; ".join(f"{', '.join(sorted(names))} (inputs {how})" for how, names in sorted(said.items()))
    return [f"micro-benchmark figures {named} do not state their operands random with a seed (inputs "
            f"{MICRO_INPUTS}, seed N): constant inputs (all ones or zeros) run faster on some hardware, so these "
            "figures are not comparable"]


def token_accounting(metrics: Optional[dict[str, Any]], instruction: bool, micro_batch: int) -> list[str]:
    """An instruction-data round of batches of several samples whose effective tokens/s equals its padded
    tokens/s: padding counted? (A batch of one sample is padded to itself: nothing to say there.)"""
    if not metrics or not instruction or micro_batch < 2:
        return []
    tokens, effective = metrics.get("tokens_per_s_per_device"), metrics.get("effective_tokens_per_s_per_device")
    if tokens and effective is not None and effective >= tokens:
        return [f"effective tokens/s/device ({effective:,.6g}) equals tokens/s/device with padding ({tokens:,.6g}) "
                f"over every measured step of batches of {micro_batch} samples padded to their longest: is padding "
                "counted as effective tokens?"]
    return []


def round_warnings(workload, metrics: Optional[dict], figures: list[dict]) -> list[str]:
    if not task_of(workload.task).trains:  # a micro-benchmark: its figures' inputs
        return micro_inputs(figures)
    return token_accounting(metrics, workload.data.instruction, workload.train.micro_batch_size)

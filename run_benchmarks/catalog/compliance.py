"""A resolved workload against its case's policy (policy.py): compliant, or each departing key with its value,
the case's value, where it was set and the rule it breaks, with that rule's source.

The case's value is the workload the case's own files give (case.yaml and what it extends) at the same
world size, before the extern config, test_conf and ``--set``. The verdict travels with the plan, into the
round's record and every view; a departing run still runs (vendors explore) unless ``--strict``.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from pydantic import BaseModel, ConfigDict, Field

from training.contract import batch
from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.policy import Matched, Policy

NON_COMPLIANT = "non-compliant"
RELATIVE_TOLERANCE = 1e-9  # a learning rate written as 3e-4 x 128 in decimal still scales by 128


class Departure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="the dotted workload key")
    value: Any = Field(description="what the run used")
    case_value: Any = Field(description="what the case's own files give")
    set_in: str = Field("", description="the file or flag that set the run's value")
    rule: str = Field(description="the rule it breaks, in words: 'fixed: the model's shape'")
    allowed: str = Field("", description="what the rule would have allowed, where it allows more than one value")
    source: str = Field(description="whose rule: FlagPerf's rule, MLPerf Training rules, a published benchmark")
    url: str = ""
    policy_file: str = Field("", description="the policy file that states the rule")

    def sentence(self) -> str:
        """``model.n_layer 3 (the case's 2; set in --set model.n_layer=3): fixed: the model's shape [FlagPerf's
        rule]``."""
        said = [f"the case's {_text(self.case_value)}"] + ([f"allowed {self.allowed}"] if self.allowed else []) \
            + ([f"set in {self.set_in}"] if self.set_in else [])
        return f"{self.key} {_text(self.value)} ({'; '.join(said)}): {self.rule} [{self.source}]"


class Compliance(BaseModel):
    """The verdict a round's record carries (``RoundRecord.compliance``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compliant: bool
    policy: list[str] = Field(default_factory=list, description="the policy files judged by, the case's own first")
    departures: list[Departure] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict, description="sha256 of each file the workload was "
                                  "resolved and judged from: case files, extern config, vendor file, policies")

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.departures]

    def summary(self) -> str:
        """``compliant`` or ``non-compliant: model.n_layer 3 (the case's 2 ...): ...; train.precision ...``."""
        if self.compliant:
            return "compliant with its case's policy (" + ", ".join(self.policy) + ")"
        return f"{NON_COMPLIANT}: " + "; ".join(d.sentence() for d in self.departures)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "unset"
    return json.dumps(value) if isinstance(value, (list, dict, bool)) else str(value)


def flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """``{"model": {"n_layer": 2}}`` -> ``{"model.n_layer": 2}``; lists and None stay whole values."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _lr_bounds(baseline: WorkloadSpec, resolved: WorkloadSpec, world_size: int) -> tuple[float, float, float]:
    factor = batch.global_batch(resolved, world_size) / batch.global_batch(baseline, world_size)
    lr = baseline.train.lr
    return lr * min(1.0, factor), lr * max(1.0, factor), factor


def _within(value: Any, low: float, high: float) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    slack = RELATIVE_TOLERANCE * max(abs(low), abs(high))
    return low - slack <= value <= high + slack


def _departs(matched: Matched, key: str, value: Any, baseline: WorkloadSpec, resolved: WorkloadSpec,
             world_size: int) -> Optional[str]:
    """None when the rule allows ``value``; else what it would have allowed (may be empty)."""
    kind = matched.rule.rule
    if kind == "free":
        return None
    if kind == "one_of":
        return None if value in matched.rule.allowed else ", ".join(map(_text, matched.rule.allowed))
    if kind == "scales_with_batch":
        low, high, factor = _lr_bounds(baseline, resolved, world_size)
        if _within(value, low, high):
            return None
        return (f"between {low:g} and {high:g} (the global batch is {factor:g} x the case's)"
                if math.isfinite(factor) and factor != 1 else f"{baseline.train.lr:g} (the case's global batch)")
    return ""


def judge(policy: Optional[Policy], baseline: WorkloadSpec, resolved: WorkloadSpec, world_size: int,
          set_in: Callable[[str], str] = lambda key: "", files: Iterable[Path] = (),
          root: Optional[Path] = None) -> Optional[Compliance]:
    """``resolved`` against ``policy`` (None: the tree has no policy, nothing is judged). ``set_in(key)``
    names the layer that set a key; ``files``: what the workload was resolved from, hashed into the verdict
    and named relative to ``root`` (the checkout) where they lie inside it."""
    if policy is None:
        return None
    mine, theirs = flat(resolved.model_dump(mode="json")), flat(baseline.model_dump(mode="json"))
    departures = []
    inside = f"{Path(root).resolve()}/" if root is not None else None
    for key in sorted(set(mine) | set(theirs)):
        value, case_value = mine.get(key), theirs.get(key)
        if value == case_value:
            continue
        matched = policy.rule_for(key)
        allowed = _departs(matched, key, value, baseline, resolved, world_size)
        if allowed is None:
            continue
        where = set_in(key)
        where = where[len(inside):] if inside and where.startswith(inside) else where  # a file in the checkout
        departures.append(Departure(key=key, value=value, case_value=case_value, set_in=where,
                                    rule=matched.words, allowed=allowed, source=matched.source.title,
                                    url=matched.source.url, policy_file=_relative(matched.file, root)))
    hashed = {_relative(p, root): file_sha256(Path(p)) for p in [*files, *policy.paths]}
    return Compliance(compliant=not departures, policy=[_relative(p, root) for p in policy.paths],
                      departures=departures, files={p: h for p, h in hashed.items() if h is not None})


def _relative(path, root: Optional[Path]) -> str:
    """Inside the checkout: its path there; outside it: its file name only (as exports name a config), so a
    record or certificate handed on names no folder of the machine it ran on; the hash identifies the file."""
    if root is None:
        return str(path)
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return Path(path).name


def file_sha256(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None

"""What each case declares a run may change: ``cases/policy.yaml`` (the default policy) and a case's own
``cases/<case>/policy.yaml`` beside its case.yaml, which adds rules and sources or overrides the default's on
the keys it names.

A rule names workload keys (dotted; ``*`` matches the rest of a key, ``model.*``) and what a run may do with
them: ``fixed`` (the case's own value), ``free``, ``one_of`` (``allowed``) or ``scales_with_batch`` (the
learning rate, between the case's and the linear scaling rule's). Each rule names its source (FlagPerf's rule,
MLPerf's rules, the published benchmark the case reproduces), so a departure says whose rule it breaks.
``compliance.py`` judges a resolved workload against the rules; this module only reads and matches them.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from run_benchmarks.catalog.config import Strict, load_model

DEFAULT_FILE = "policy.yaml"  # under cases/: the default; under cases/<case>/: the case's own
RuleKind = Literal["fixed", "free", "one_of", "scales_with_batch"]
UNNAMED_WHY = "a key no rule names is the case's until a policy says otherwise"


class Source(Strict):
    title: str = Field(description="whose rule: FlagPerf's rule, MLPerf Training rules, a published benchmark")
    url: str = ""
    says: str = Field("", description="what the source says, in a sentence")


class Rule(Strict):
    keys: list[str] = Field(min_length=1, description="dotted workload keys; '*' matches the rest of a key")
    rule: RuleKind
    why: str = Field(description="what the keys are, as a departure names it: 'the model's shape'")
    source: str = Field(description="a name under sources: (this file's or the default policy's)")
    allowed: list[Any] = Field(default_factory=list, description="one_of: the values a run may choose")

    @model_validator(mode="after")
    def _allowed_with_one_of(self) -> "Rule":
        if (self.rule == "one_of") != bool(self.allowed):
            raise ValueError("allowed lists the values of a one_of rule, and a one_of rule needs allowed")
        return self


class PolicyFile(Strict):
    description: str = ""
    sources: dict[str, Source] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)


@dataclass(frozen=True)
class Matched:
    """The rule a key falls under, with the file and source that state it."""

    rule: Rule
    file: str
    source: Source

    @property
    def words(self) -> str:
        """``fixed: the model's shape``, ``one of fp32, bf16, fp16: precision ...``."""
        kind = {"one_of": "one of " + ", ".join(map(str, self.rule.allowed)),
                "scales_with_batch": "scales with the global batch"}.get(self.rule.rule, self.rule.rule)
        return f"{kind}: {self.rule.why}"


UNNAMED = Matched(Rule(keys=["*"], rule="fixed", why=UNNAMED_WHY, source="accelbench"), "(no rule)",
                  Source(title="accelbench's default for keys no rule names"))


def _specificity(pattern: str, key: str) -> int:
    """An exact key beats any pattern; a longer pattern beats a shorter one (``debug.grad_noise`` over
    ``debug.*``)."""
    return 1 << 20 if pattern == key else len(pattern.replace("*", ""))


@dataclass(frozen=True)
class Policy:
    """The rules a case's runs are judged by: its own file's first, then the default's."""

    files: tuple[tuple[str, PolicyFile], ...]  # (path, file), the case's own first

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.files]

    def source(self, name: str) -> Optional[Source]:
        return next((f.sources[name] for _, f in self.files if name in f.sources), None)

    def rule_for(self, key: str) -> Matched:
        """The rule of the most specific pattern that matches ``key`` in the first file that has one."""
        for path, policy in self.files:
            found = [(_specificity(p, key), rule) for rule in policy.rules for p in rule.keys
                     if p == key or fnmatch.fnmatchcase(key, p)]
            if found:
                rule = max(found, key=lambda item: item[0])[1]
                return Matched(rule, path, self.source(rule.source) or Source(title=rule.source))
        return UNNAMED


def _checked(path: Path, policy: PolicyFile, sources: dict[str, Source]) -> PolicyFile:
    from run_benchmarks.errors import UserError

    for i, rule in enumerate(policy.rules):
        if rule.source not in sources:
            raise UserError(f"{path}: rules[{i}].source {rule.source!r} names no source",
                            f"add it under sources: in {path}, or use one of: {', '.join(sorted(sources))}")
    return policy


def load(cases_dir: Path, case: str) -> Optional[Policy]:
    """The policy of ``case``: its own ``policy.yaml`` (if any) over the default ``cases/policy.yaml``; None
    where the tree has no default policy (an older checkout given with --root)."""
    default_path = cases_dir / DEFAULT_FILE
    if not default_path.is_file():
        return None
    default = load_model(PolicyFile, default_path)
    files = [(str(default_path), _checked(default_path, default, default.sources))]
    own_path = cases_dir / case / DEFAULT_FILE
    if own_path.is_file():
        own = load_model(PolicyFile, own_path)
        files.insert(0, (str(own_path), _checked(own_path, own, {**default.sources, **own.sources})))
    return Policy(tuple(files))

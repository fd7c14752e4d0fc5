"""The orchestrator's registries: frameworks, accelerator kinds, launchers, node runtimes, host backends,
schedulers, log parsers, report formats and commands, in the one style both halves share
(``training/contract/registry.py``: built-ins registered by ``"module:attribute"`` path, imported when first
asked for; an entry may be present but unusable here, and says why). Here an unknown or unusable name is a
``UserError`` (exit 2) that lists the known ones and the closest match.
"""
from __future__ import annotations

from typing import TypeVar

from training.contract.registry import Registry as _Registry
from training.contract.registry import Unusable, instance_of

from run_benchmarks.errors import UserError

T = TypeVar("T")

__all__ = ["Registry", "Unusable", "instance_of"]


class Registry(_Registry[T]):
    def refusal(self, problem: str, fix: str) -> Exception:
        return UserError(problem, fix)

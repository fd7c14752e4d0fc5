"""The orchestrator's registries: frameworks, accelerator kinds, node runtimes, host backends, schedulers and
log parsers, in the one style both halves share (``training/contract/registry.py``: ``register`` and ``get``,
plugin modules imported when first asked for). Here an unknown name is a ``UserError`` (exit 2) that lists
the known ones and the closest match.
"""
from __future__ import annotations

from typing import TypeVar

from training.contract.registry import Registry as _Registry

from run_benchmarks.errors import UserError

T = TypeVar("T")


class Registry(_Registry[T]):
    def refusal(self, problem: str, fix: str) -> Exception:
        return UserError(problem, fix)

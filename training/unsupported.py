"""The one exception both frameworks' workers raise when the device cannot run what the case asks for.

Framework-neutral (no torch, no paddle), so either worker can raise it and the
entry point (``training/run_pretraining.py``) turns it into an ``unsupported``
perf record and ``contract.EXIT_UNSUPPORTED``, which the orchestrator records as
``unsupported`` instead of ``failed``.
"""
from __future__ import annotations

from typing import Optional


class UnsupportedOnDevice(RuntimeError):
    """This device cannot run what the case asks for; the result says so instead of failing."""

    rank: Optional[int] = None  # the global rank that found out, filled in by the harness

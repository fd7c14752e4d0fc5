"""Python's cyclic garbage collector in a worker process: off from the entry (training/run_pretraining.py and the
test workers switch it off before their imports) until the first measured step.

The collector ran some hundred times over the objects that torch, torch._dynamo and sympy make on import and in
the first optimizer step: 0.6-0.7 s of a 6-step gpt2_tiny worker's 5.4 s of CPU on a 2-core machine (8 runs,
alternating with and without); a gpt2_tiny 1x2 run took 14.5 s of CPU before, 11.9 s after. torchtitan's trainer
turns automatic collection off too (``gc_freq``), against stragglers. ``resume`` collects the warm-up's garbage
once, outside every clock and before the memory peaks are reset (a cycle may hold device memory), and freezes
what is left (modules, model, optimizer) out of later scans, so a full collection inside a measured step stays
short.
"""
from __future__ import annotations

import gc


def resume() -> None:
    """At the first measured step (training/harness.py), or after a task without steps; idempotent, and
    nothing where the collector was never paused (a test process running the entry in-process)."""
    if not gc.isenabled():
        gc.collect()
        gc.freeze()
        gc.enable()

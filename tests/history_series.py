"""Stored daily series for the history tests: one run a day of one workload, each a round analysed from perf
records as a run analyses them (test_noise.metrics: its steps jitter, so each round stores its own noise
interval), written through the store as a run writes it (test_results.fill)."""
from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from typing import Optional

from .test_noise import TOKENS, metrics
from .test_results import document, fill

START = datetime(2026, 9, 1, 2, 0, tzinfo=timezone.utc)
RATE = 20_000.0  # tokens/s per device of the level before any shift


def rate_series(days: int, drop_at: Optional[int] = None, drop: float = -0.08, bad_day: Optional[int] = None,
                bad: float = -0.12, noise: float = 0.01, seed: int = 1) -> list[float]:
    """Tokens/s per device per day: the level with ``noise`` (relative, normal on the log scale), ``drop`` from
    day ``drop_at`` on, and one bad day."""
    rng = random.Random(seed)
    out = []
    for day in range(days):
        value = RATE * math.exp(rng.gauss(0, noise))
        if drop_at is not None and day >= drop_at:
            value *= 1 + drop
        if day == bad_day:
            value *= 1 + bad
        out.append(value)
    return out


def day_doc(day: int, rate: float, case: str = "gpt2_tiny", seed: int = 0, env: Optional[dict] = None,
            debug: Optional[dict] = None, contended: bool = False, prefix: str = "night") -> dict:
    """Day ``day``'s round: 24 measured steps around the step time that gives ``rate``, 0.5 % apart."""
    rng = random.Random(seed * 1000 + day)
    step = TOKENS / rate
    doc = document(f"{prefix}{day:03d}", case, "torch", step, world=1)
    doc["metrics"] = metrics([step * math.exp(rng.gauss(0, 0.005)) for _ in range(24)])
    at = START + timedelta(days=day)
    doc["started_at"], doc["ended_at"] = at.isoformat(), (at + timedelta(minutes=5)).isoformat()
    doc["workload"] = {"task": "pretrain", "model": {"family": "gpt2", "n_layer": 2, "d_model": 64},
                       "train": {"precision": "bf16", "steps": 26, "warmup_steps": 2},
                       **({"debug": debug} if debug else {})}
    node = {"node_rank": 0, "host": "bench-01", "image": None, "image_id": None,
            "probes": {"host_kernel": "6.1.0-28-amd64", "driver_version": "550.54"},
            "environment": {"torch": "2.13.0+cpu", "python": "3.11.7", "kernel": "6.1.0-28-amd64"}}
    for key, value in (env or {}).items():
        if key.startswith("probe "):
            node["probes"][key[len("probe "):]] = value
        elif key == "host":
            node["host"] = value
        else:
            node["environment"][key] = value
    doc["environment"] = {"orchestrator": {"accelbench_commit": "abc123"}, "nodes": [node],
                          "vendor_file_sha256": "f" * 64}
    if contended:
        doc["monitor"] = {"contention": {"verdict": "contended", "nodes": [],
                                         "reasons": ["others used 63% of the run's 2 core(s) (limit 25%)"]}}
    return doc


def store_series(db, rates: list[float], **options) -> list[dict]:
    """One run a day into ``db``; ``options``: day_doc's, each as {day: value} for env, debug and contended."""
    docs = []
    env, debug, contended = (options.pop(k, {}) for k in ("env", "debug", "contended"))
    for day, rate in enumerate(rates):
        latest_env = {k: v for d, e in sorted(env.items()) if d <= day for k, v in e.items()}
        latest_debug = next((debug[d] for d in sorted(debug, reverse=True) if d <= day), None)
        docs.append(day_doc(day, rate, env=latest_env, debug=latest_debug, contended=day in contended, **options))
    fill(db, docs)
    return docs

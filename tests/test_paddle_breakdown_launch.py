"""The measured time breakdown on real Paddle ranks (``paddle.distributed.launch``, gloo on the CPU): plain data
parallel, then the same with every debug delay set, in turn inside ONE launch (tests/parity_launch.py), so the
test pays for one start of Paddle. Injected costs land where they belong, as tests/test_breakdown_worker.py
shows for torch: a collective delay of D ms on C all-reduces grows communication by C x D (within 20 %) and not
compute, a data-fetch delay lands in data, one rank's compute delay names it the straggler."""
from __future__ import annotations

import pytest

from training.contract import perflog

from .parity_launch import Run, launch
from .test_parity import ONE_THREAD

pytestmark = pytest.mark.e2e

CASE = "gpt3_tiny:paddle:cpu:1:2"
COMMON = ("train.steps=2", "train.warmup_steps=1", "train.micro_batch_size=2", "train.breakdown_steps=3")
# Far above a loaded machine's noise; each comparison takes the fastest step: load only ever adds time.
COLLECTIVE_MS, DATA_MS, COMPUTE_MS = 250.0, 100.0, 400.0
DELAYS = (f"debug.collective_delay_ms={COLLECTIVE_MS}", f"debug.data_fetch_delay_ms={DATA_MS}",
          f"debug.compute_delay_ms={COMPUTE_MS}", "debug.fail_rank=1")


def _breakdowns(run, label: str) -> list[perflog.BreakdownRecord]:
    out = []
    for path in run.sections[label]:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = perflog.parse_line(line)
            except perflog.PerfLogError:
                continue
            if isinstance(record, perflog.BreakdownRecord):
                out.append(record)
    return out


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict:
    run = launch(tmp_path_factory.mktemp("paddle_breakdown"),
                 [Run("plain", CASE, ()), Run("delayed", CASE, DELAYS)], COMMON, env=ONE_THREAD)
    assert {"plain", "delayed"} <= run.finished, run.errors
    return {label: _breakdowns(run, label) for label in ("plain", "delayed")}


def test_paddle_data_parallel_breakdown_puts_injected_costs_in_their_phase(records):
    (a0, a1), (b0, b1) = records["plain"], records["delayed"]
    assert a0.not_measured is None and a0.group_size == 2 and a0.steps == 3
    assert set(a0.collective_ops) == {"allreduce"} and a0.bucket_bytes == b0.bucket_bytes == b1.bucket_bytes
    from training.contract import flops
    from training.contract.spec import ModelSpec
    import yaml

    from .conftest import ROOT

    model = ModelSpec(**yaml.safe_load((ROOT / "cases" / "gpt3_tiny" / "case.yaml").read_text())["model"])
    assert sum(a0.bucket_bytes) == flops.total_params(model) * 4  # every fp32 gradient, once
    collectives = len(b0.bucket_bytes)
    delay = collectives * COLLECTIVE_MS / 1000
    grew = min(b0.communication_s) - min(a0.communication_s)
    assert abs(grew - delay) <= 0.2 * delay, (collectives, a0.communication_s, b0.communication_s)
    assert min(b0.compute_s) - min(a0.compute_s) < 0.5 * COLLECTIVE_MS / 1000, (a0.compute_s, b0.compute_s)
    assert min(b0.data_s) - min(a0.data_s) >= 0.8 * DATA_MS / 1000  # the data-fetch delay lands in data
    assert min(b1.compute_s) >= COMPUTE_MS / 1000  # the slow rank's own compute holds its delay
    from run_benchmarks.results.breakdown import measured

    assert measured([b0, b1], None)["straggler"]["rank"] == 1
    assert measured([a0, a1], None)["per_rank"][1]["compute_s"] < COMPUTE_MS / 1000

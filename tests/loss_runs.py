"""Real training runs of one process trained in the test's own process, cheaply: for tests/test_loss_runs.py
(loss references) and tests/test_paddle_finetune_layouts.py (the torch reference of Paddle's two-rank layouts).

Each run is planned by the orchestrator's own code from a case name and ``--set`` settings
(``tests/parity_launch.py``'s ``plan``, what ``accelbench run`` goes through), trained by the worker's own
entry (``training.run_pretraining.main``) with its perf records sent to its node folder's ``rank0.stdout.log``,
and read back as a launch's are (``parity_launch.Launch``: steps, trajectory, the round's figures as the
orchestrator computes them), or as the stored row a loss reference reads (``RunCurve``). No launcher and no
worker start (torchrun's agent and the worker's torch import: ~7 CPU s a 1x1 launch). Runs of several ranks or
of Paddle go through one real launch per world size and framework (``tests/parity_launch.py``).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from run_benchmarks.plan import CasePlan
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.checks.loss_reference import RunCurve
from run_benchmarks.results.store.schema import Attempt

from .parity_launch import Launch, Run, plan


def attempt(case: CasePlan, label: str, metrics: analyze.RoundMetrics) -> Attempt:
    """The ok row the store keeps for ``case``'s round 1 (the columns a loss reference reads)."""
    name = case.name
    return Attempt({"run_id": label, "round": 1, "status": "ok", "case": name.case, "case_name": str(name),
                    "framework": name.framework, "framework_version": name.framework_version,
                    "hardware": name.hardware, "nnodes": name.nnodes, "nprocs_per_node": name.nprocs_per_node,
                    "repeat": name.repeat, "workload": case.workload.model_dump(mode="json"),
                    "metrics": {"loss_series": metrics.loss_series}})


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """This process trains with one OpenMP thread, as torchrun starts each rank of a launch of several (and
    tests/test_parity.py's one-process launch, ``ONE_THREAD``): beside the other lanes, two threads spinning at
    every barrier cost 3x the CPU (measured: 7.3 s against 2.1 s for a run, fp16 14.5 s against 4.9 s), and
    fp32 sums keep one order. The threads this process had come back after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def in_process(root: Path, runs: list[Run], common: tuple[str, ...] = ()) -> Launch:
    """Each run (one process each) planned into ``root/run`` and trained in this process, in turn; read back as
    ``parity_launch.launch``'s runs are. A run that raises fails the caller, with its traceback."""
    from training import run_pretraining

    run_dir = root / "run"
    plans = {run.label: plan(run_dir, run, common) for run in runs}
    assert len(plans) == len(runs), "labels must differ"
    assert all(p.name.world_size == 1 for p in plans.values()), "one process each"
    result = Launch(plans, root / "system-tmp", run_dir)
    result.system_tmp.mkdir(parents=True, exist_ok=True)
    for label, case in plans.items():
        node_dir = case.rounds[0].nodes[0].log_dir
        node_dir.mkdir(parents=True, exist_ok=True)
        log = node_dir / "rank0.stdout.log"
        with open(log, "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
            run_pretraining.main(["--config", str(case.rounds[0].config_path)])
        result.sections[label] = [log]
        result.finished.add(label)
    return result


def train_here(root: Path, label: str, case_name: str, settings: tuple[str, ...]) -> RunCurve:
    """One process, in this one: planned, trained by the worker's entry, read back as a stored round."""
    return launched(in_process(root, [Run(label, case_name, settings)]), label)


def launched(result: Launch, label: str) -> RunCurve:
    """A run of a real launch (every rank's records), as a stored round."""
    return RunCurve(attempt(result.plans[label], label, result.metrics(label)))

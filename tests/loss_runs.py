"""Real training runs as a loss reference sees them, cheaply: for tests/test_loss_runs.py.

One-process runs train in this process: each is planned by the orchestrator's own code from a case name and
``--set`` settings (``tests/parity_launch.py``'s ``plan``, what ``accelbench run`` goes through), trained by
the worker's own entry (``training.run_pretraining.main``) with its perf records sent to a file, and read
back into the round's figures as the orchestrator reads them (``rank_logs`` + ``analyze.round_metrics``).
Runs of several ranks or of Paddle go through one real launch per world size and framework
(``tests/parity_launch.py``). Either becomes the stored row a reference reads (``RunCurve``), so the check
under test is ``loss_check`` itself.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

from run_benchmarks.results.worker_logs.rank_logs import RankLogs
from run_benchmarks.plan import CasePlan
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
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


def train_here(root: Path, label: str, case_name: str, settings: tuple[str, ...]) -> RunCurve:
    """One process, in this one: planned, trained by the worker's entry, read back as a stored round."""
    from training import run_pretraining

    case = plan(root, Run(label, case_name, settings), ())
    log = root / f"{label}.rank0.stdout.log"
    with open(log, "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
        run_pretraining.main(["--config", str(case.rounds[0].config_path)])
    metrics = analyze.round_metrics(list(collect.read_ranks([RankLogs(0, log, log)])), None, "")
    return RunCurve(attempt(case, label, metrics))


def launched(result: Launch, label: str) -> RunCurve:
    """A run of a real launch (every rank's records), as a stored round."""
    return RunCurve(attempt(result.plans[label], label, result.metrics(label)))

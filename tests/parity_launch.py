"""One real launch that trains several strategies in turn (``tests/parity_worker.py``), for the parity tests.

Where some strategies cannot share a process (Paddle: one fleet layout per process), one launch per group
(``launch``'s ``group_by``); each strategy's results are read back the same way.

Each strategy is planned by the orchestrator's own code, ``run_benchmarks.planner.build.build_case_plan`` (what
``accelbench run CASE --set ...`` goes through), from its case name and settings, into its own case folder
of one run folder, and its ``config.json`` written by ``rounds.write_inputs``, as a run writes it. The
launch is the launcher argv and environment the plan gives a node (torchrun or paddle.distributed.launch,
its rendezvous, ``TMPDIR`` and the compiler's cache inside the run folder), with ``tests/parity_worker.py``
as the entry instead of ``training/run_pretraining.py``. The ranks' logs are gathered as the orchestrator
gathers them, then cut at the worker's markers into each strategy's ``rank<N>.stdout.log`` in its own node
folder, where its perf records are read back (rank 0's steps; every rank's for the run's figures).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Hashable, Optional

from run_benchmarks.backends import launchers
from run_benchmarks.results.figures import analyze
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.worker_logs.rank_logs import RankLogs
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.plan import CasePlan
from run_benchmarks.planner.build import build_case_plan
from run_benchmarks.execute.rounds import write_inputs
from training.contract import perflog, ports
from training.contract.names import WORKER_MODULE, WORKER_SCRIPT

from .conftest import ROOT
from .parity_worker import MARKER
from .runner import ends_with_the_test

ENTRY_MODULE, ENTRY_SCRIPT = "tests.parity_worker", "tests/parity_worker.py"
LAUNCH_TIMEOUT_S = 900  # every strategy of a world size, on 2 busy cores (a launch takes 10-60 s here)
ERROR_TAIL_LINES = 40
STOP_GRACE_S = 30


@dataclass(frozen=True)
class Run:
    """One strategy of a launch: a label (its folder's name), a case name and its ``--set`` settings."""

    label: str
    case_name: str
    settings: tuple[str, ...]


@dataclass
class Launch:
    """What the launches of a set of runs left: each run's perf-record sections per rank, or why it has none."""

    plans: dict[str, CasePlan]
    system_tmp: Path  # TMPDIR around every launcher: must stay empty
    run_dir: Path
    launches: int = 0
    sections: dict[str, list[Path]] = field(default_factory=dict)  # label -> rank<N>.stdout.log by rank
    finished: set[str] = field(default_factory=set)  # labels every rank ended
    failures: dict[str, str] = field(default_factory=dict)  # label -> why it has no complete run
    errors: str = ""  # every failed launch's launcher output and ranks' stderr tails

    def _check(self, label: str) -> None:
        if label not in self.plans:
            raise KeyError(f"{label!r} was not in this launch: {sorted(self.plans)}")
        if label not in self.finished:
            raise AssertionError(f"{label}: no complete run: {self.failures.get(label, 'no markers')}")

    def steps(self, label: str) -> list[perflog.StepRecord]:
        """Rank 0's step records of ``label``."""
        self._check(label)
        lines = self.sections[label][0].read_text(encoding="utf-8", errors="replace").splitlines()
        return [r for r in map(_record, lines) if isinstance(r, perflog.StepRecord)]

    def trajectory(self, label: str) -> list[tuple[float, float]]:
        """(loss, gradient norm) per step, from rank 0's perf records (as tests/test_parity.py's ``trajectory``)."""
        return [(r.loss, r.grad_norm) for r in self.steps(label)]

    def ranks(self, label: str) -> list[collect.RankLog]:
        """Every rank's records of ``label``, read as the orchestrator reads a round's rank logs."""
        self._check(label)
        return list(collect.read_ranks([RankLogs(rank, path, path) for rank, path in enumerate(self.sections[label])]))

    def metrics(self, label: str) -> analyze.RoundMetrics:
        """The run's figures, as the orchestrator computes them from every rank's records."""
        return analyze.round_metrics(self.ranks(label), None, "")


def _record(line: str) -> Optional[perflog.Record]:
    try:
        return perflog.parse_line(line)
    except perflog.PerfLogError:
        return None


def plan(run_dir: Path, run: Run, common: tuple[str, ...]) -> CasePlan:
    """``accelbench run CASE --set ...``'s plan of ``run``, in ``run_dir/<label>``, its config.json written."""
    case = build_case_plan(load_inputs(ROOT), run.case_name, run_dir.name, run_dir / run.label,
                           assignments=(*common, *run.settings))
    write_inputs(case, case.rounds[0])
    return case


def entry_argv(argv: list[str], configs: Path) -> list[str]:
    """The plan's launcher argv with this tests' entry instead of the worker's."""
    assert argv[-2] == "--config", argv
    if argv[-4:-2] == ["-m", WORKER_MODULE]:  # torchrun
        return [*argv[:-4], "-m", ENTRY_MODULE, "--configs", str(configs)]
    assert argv[-3].endswith(WORKER_SCRIPT), argv  # paddle.distributed.launch takes a script
    return [*argv[:-3], str(ROOT / ENTRY_SCRIPT), "--configs", str(configs)]


def launch(root: Path, runs: list[Run], common: tuple[str, ...] = (),
           group_by: Optional[Callable[[CasePlan], Hashable]] = None, env: Optional[dict] = None) -> Launch:
    """Plan every run (one framework, one world size, one node) into one run folder, then train them in one
    launch, or in one launch per value of ``group_by(plan)`` where some runs cannot share a process (Paddle:
    one fleet layout per process), in the order of ``runs``. ``env``: the environment the launcher starts
    in, as if accelbench had been started in it (the plan's own variables win)."""
    run_dir = root / "run"
    plans = {run.label: plan(run_dir, run, common) for run in runs}
    assert len(plans) == len(runs), "labels must differ"
    first = plans[runs[0].label]
    assert all(len(p.rounds[0].nodes) == 1 and p.name.world_size == first.name.world_size
               and p.name.framework == first.name.framework for p in plans.values()), "one node, one world size"
    groups: dict[Hashable, list[Run]] = {}
    for run in runs:
        groups.setdefault(group_by(plans[run.label]) if group_by else None, []).append(run)
    result = Launch(plans, root / "system-tmp", run_dir)
    result.system_tmp.mkdir(exist_ok=True)
    for index, group in enumerate(groups.values()):
        _launch_one(result, f"launch{index + 1}" if len(groups) > 1 else "launch", group, common, env or {})
    return result


def _launch_one(result: Launch, name: str, runs: list[Run], common: tuple[str, ...], env: dict) -> None:
    # The launch's own node folder: its first run planned once more, in run_dir/<name>.
    node = plan(result.run_dir, Run(name, runs[0].case_name, runs[0].settings), common).rounds[0].nodes[0]
    configs = result.run_dir / f"{name}.json"
    configs.write_text(json.dumps([[run.label, str(result.plans[run.label].rounds[0].config_path)] for run in runs]))
    (node.log_dir / "tmp").mkdir(parents=True, exist_ok=True)  # what the orchestrator stages before a start
    with open(node.launcher_log, "w", encoding="utf-8") as log:
        # A launch that outlives the deadline (or an interrupted test) is stopped as the orchestrator stops
        # one: SIGTERM, on which the launcher stops its ranks (each in a session of its own), then SIGKILL.
        argv = ports.filled(node.argv, ports.free_ports(1)[0])  # master_port auto: chosen here, where it starts
        process = subprocess.Popen(entry_argv(argv, configs), cwd=node.cwd, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=ends_with_the_test(),
                                   env={**os.environ, "TMPDIR": str(result.system_tmp), **env, **node.env})
        try:
            ending = f"exit {process.wait(timeout=LAUNCH_TIMEOUT_S)}"
        except subprocess.TimeoutExpired:
            ending = f"killed after {LAUNCH_TIMEOUT_S} s"
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
    result.launches += 1
    first = result.plans[runs[0].label]
    ranks = launchers.of(first).gather_rank_logs(node.log_dir, 0, first.name.nprocs_per_node)
    running = _split(result, ranks)
    labels = [run.label for run in runs]
    if ending == "exit 0" and result.finished.issuperset(labels):
        return
    errors = "\n".join([f"--- {name}: {ending}; launcher ({node.launcher_log})",
                        *collect.tail(node.launcher_log, ERROR_TAIL_LINES),
                        *(line for logs in ranks for line in
                          [f"--- rank {logs.rank} ({logs.stderr})", *collect.tail(logs.stderr, ERROR_TAIL_LINES)])])
    result.errors += errors + "\n"
    for label in labels:
        if label not in result.finished:
            where = ("it was running when the launch ended" if running == label
                     else f"the launch ended before it, in {running!r}")
            result.failures[label] = f"{where}\n{errors}"


def _split(result: Launch, ranks: list[RankLogs]) -> Optional[str]:
    """Each rank's stdout cut at the markers into the runs' node folders; the run rank 0 had not ended."""
    ended: dict[str, int] = {}
    running = None
    for logs in ranks:
        current, out = None, None
        text = logs.stdout.read_text(encoding="utf-8", errors="replace") if logs.stdout.is_file() else ""
        for line in text.splitlines():
            at = line.find(MARKER)
            if at >= 0:
                mark = json.loads(line[at + len(MARKER):])
                if out is not None:
                    out.close()
                    out = None
                if mark["event"] == "start":
                    current = mark["label"]
                    node_dir = result.plans[current].rounds[0].nodes[0].log_dir
                    node_dir.mkdir(parents=True, exist_ok=True)
                    path = node_dir / f"rank{logs.rank}.stdout.log"
                    result.sections.setdefault(current, []).append(path)
                    out = open(path, "w", encoding="utf-8")
                else:
                    ended[mark["label"]] = ended.get(mark["label"], 0) + 1
                    current = None
                continue
            if out is not None:
                out.write(line + "\n")
        if out is not None:
            out.close()
        if logs.rank == 0:
            running = current
    result.finished |= {label for label, count in ended.items() if count == len(ranks)}
    return running

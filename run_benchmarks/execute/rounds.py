"""Round execution: start monitors and nodes, wait with a deadline while showing progress, stop every
node when one fails, collect the logs, and run again a round whose ranks never connected.

A failure on one node stops every node of that case; whatever the ending (success, crash, deadline,
Ctrl-C) the logs stay, the runtimes clean up, and the round gets a result.
"""
from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

import yaml

from training.contract import perflog

from run_benchmarks.execute import outcome, quiet
from run_benchmarks.execute.beside import RunsBeside
from run_benchmarks import signals
from run_benchmarks.backends import launchers
from run_benchmarks.backends.fanout import fan_out
from run_benchmarks.backends.hosts import Host, Job
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.breakdown import step as breakdown
from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan
from run_benchmarks.execute.preflight import Preflight
from run_benchmarks.results.report.live import LiveStep
from run_benchmarks.backends.runtimes import RunRuntimes
from run_benchmarks.backends.schedulers import Scheduler
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable

MONITOR_GRACE_S = 5.0
POLL_S = 0.5  # how often the orchestrator looks at its nodes; it shares the cores being measured
ENDING_POLL_S = 0.05  # once rank 0 has written its end record nothing is measured any more: notice the exit soon
STOP_GRACE_S = 10.0
START_RETRIES = 2  # extra attempts for a round whose ranks never connected (Launcher.start_errors)


class Reporter(Protocol):
    def round_started(self, case: CasePlan, rnd: RoundPlan) -> None: ...
    def progress(self, case: CasePlan, rnd: RoundPlan, step: int, live: Optional[LiveStep] = None) -> None: ...
    def round_finished(self, case: CasePlan, rnd: RoundPlan, result: RoundResult) -> None: ...



def _ssh_errors() -> tuple:
    """paramiko's error where paramiko is loaded: only an SSH host loads it, and only its connection raises
    it. Importing it here would cost every local run ~0.2 s of start-up."""
    paramiko = sys.modules.get("paramiko")
    return (paramiko.SSHException,) if paramiko is not None else ()


class RoundExecutor:
    def __init__(self, hosts: dict[str, Host], runtimes: RunRuntimes, preflight: Preflight, reporter: Reporter,
                 orchestrator_env: dict, results: list[RoundResult], store: Optional[ResultStore],
                 clock: Callable[[], float] = time.monotonic, machine_warnings: Sequence[str] = (),
                 scheduler: Optional[Scheduler] = None, leftovers: Sequence[dict] = (),
                 require_quiet: Optional[float] = None, say: Callable[[str], None] = print):
        self.hosts, self.runtimes, self.preflight, self.reporter = hosts, runtimes, preflight, reporter
        self.scheduler = scheduler or preflight.scheduler  # where the nodes come from, how they start and end
        self.orchestrator_env, self.results, self.store, self.clock = orchestrator_env, results, store, clock
        self.machine_warnings = list(machine_warnings)  # found at preflight: other runs on these hosts
        self.leftovers = list(leftovers)  # their pids, per run (cleanup.groups)
        self.require_quiet, self.say = require_quiet, say  # --require-quiet: its deadline in seconds (quiet.py)
        self.beside = RunsBeside(store, preflight.plan.run_id, self.machine_warnings, reporter)

    def run(self, case: CasePlan, rnd: RoundPlan) -> None:
        """A round whose ranks never connected (no step done) is not a result: keep its logs aside, run again."""
        notes: list[str] = []
        if self.require_quiet is not None:  # raises quiet.NotQuiet, which stops the run, past the deadline
            quiet.wait_for_quiet(self.hosts, case, rnd, self.require_quiet, self.say)
        for attempt in range(1, START_RETRIES + 2):
            try:
                result = self._run_round(case, rnd, notes)
            except KeyboardInterrupt:  # the interrupted attempt is a row too
                with signals.deferred():
                    self._store(case, self.results[-1], attempt)
                raise
            line = launchers.of(case).start_error_in(result.error_lines) if result.steps_completed == 0 \
                and result.status == "failed" else None
            if line is None or attempt > START_RETRIES:
                self._store(case, result, attempt)
                return
            kept = rnd.dir.with_name(f"{rnd.dir.name}.start-error{attempt}")
            shutil.rmtree(kept, ignore_errors=True)
            rnd.dir.rename(kept)
            self.results.remove(result)
            self._store(case, result, attempt, status="start_error", results_path=kept / "results.json")
            notes.append(f"attempt {attempt} did not start ({line.strip()[:200]}); retried; its logs: {kept}")

    def _store(self, case: CasePlan, result: RoundResult, attempt: int, **kwargs) -> None:
        outcome.store_attempt(self.store, case, result, attempt, self.orchestrator_env, **kwargs)

    def _run_round(self, case: CasePlan, rnd: RoundPlan, notes: Sequence[str] = ()) -> RoundResult:
        result = RoundResult(str(case.name), rnd.index, rnd.dir, status="failed", started_at=outcome.now())
        began = time.monotonic()
        result.warnings += self.preflight.version_warnings.get(str(case.name), [])
        result.warnings += self.machine_warnings
        result.leftovers = self.leftovers
        result.warnings += notes
        self.results.append(result)
        write_inputs(case, rnd)
        self.reporter.round_started(case, rnd)
        jobs: dict[int, Job] = {}
        monitors: dict[int, Job] = {}
        interrupted: Optional[KeyboardInterrupt] = None
        ending = "start_failed"
        try:
            self._start_nodes(case, rnd, result, jobs, monitors)
            ending = "node_failed"  # every node started: what goes wrong now is a node's failure, not its start
            ending = self._wait(case, rnd, jobs, result)
        except KeyboardInterrupt as exc:
            ending, interrupted = "interrupted", exc
            if isinstance(exc, signals.Interrupted) and exc.signum != signal.SIGINT:
                result.reason = f"{signal.Signals(exc.signum).name} received"
        except Exception as exc:  # noqa: BLE001 - a node that cannot start fails its case, not the run
            if ending == "start_failed":
                result.reason = f"a node could not start: {type(exc).__name__}: {exc}"
            else:  # e.g. a host's connection died while its node ran: the stop below names which
                result.warnings.append(f"watching the nodes failed: {type(exc).__name__}: {exc}")
        # Whatever ended the round, its cleanup runs whole: a signal arriving in it waits until it is done
        # (and a second one only cuts the grace short, see signals).
        with signals.deferred():
            self._stop(rnd, jobs, monitors, result)
            ending = _tolerant(result, "reading how the scheduler ended the round",
                               lambda: self.scheduler.conclude(ending, result)) or ending
            for node in rnd.nodes:
                if node.remote_dir is not None:
                    self._fetch_logs(node, result)
            result.rendezvous = _tolerant(result, "reading the round's master port",
                                          lambda: self.scheduler.rendezvous(rnd)) or {}
            launcher = launchers.of(case)
            all_logs = [logs for node in rnd.nodes
                        for logs in launcher.gather_rank_logs(node.log_dir, node.node_rank, case.name.nprocs_per_node)]
            outcome.finish(case, rnd, result, ending, began, lambda node: self._node_facts(case, node),
                           self.orchestrator_env, all_logs, self._allreduce_rows())
            self.reporter.round_finished(case, rnd, result)
        if interrupted is not None:
            raise interrupted
        return result

    def _start_nodes(self, case: CasePlan, rnd: RoundPlan, result: RoundResult, jobs: dict[int, Job],
                     monitors: dict[int, Job]) -> None:
        """Stage each node's folders and config, then let the scheduler start the nodes; ``jobs`` and
        ``monitors`` hold what started, for the stop."""
        for node in rnd.nodes:
            (node.log_dir / "tmp").mkdir(parents=True, exist_ok=True)
            host = self.hosts[node.host.name]
            if node.remote_dir is not None:  # the host writes its logs there; they are fetched after
                host.makedirs(node.remote_dir / "tmp")
                host.put(rnd.config_path, node.remote_dir.parent / "config.json")
        self.scheduler.start_round(case, rnd, result, jobs, monitors)

    def _wait(self, case: CasePlan, rnd: RoundPlan, jobs: dict[int, Job], result: RoundResult) -> str:
        deadline = self.clock() + case.timeout_s
        watcher = StepWatcher(case, rnd, self.scheduler.live_dir(rnd.nodes[0]))
        while True:
            codes = {rank: job.poll() for rank, job in jobs.items()}
            failed = [rank for rank, code in codes.items() if code not in (None, 0)]
            if failed or all(code is not None for code in codes.values()):
                return "node_failed" if failed else "done"
            if self.clock() > deadline:
                result.reason = f"deadline of {case.timeout_s:g} s passed"
                return "timeout"
            step = watcher.latest_step()
            if step is not None:
                self.reporter.progress(case, rnd, step, watcher.live)
            self.beside.look(str(case.name), rnd.index)
            time.sleep(ENDING_POLL_S if watcher.ended else POLL_S)

    def _stop(self, rnd: RoundPlan, jobs: dict[int, Job], monitors: dict[int, Job], result: RoundResult) -> None:
        """Stop every node's launcher and monitor. A node whose engine or connection is gone cannot be asked:
        that is a warning on the round, never an exception that would lose the round's record and leave the
        other nodes running."""
        # Every node at once, then every monitor at once (SIGTERM: it ends its line); after a signal, nodes and
        # monitors at once: the person who sent it wants the run over. Over SSH each stop is a round trip and a
        # reaper's start on its host, which one after another made a stop under load take 9 to 17 s (issue 43).
        stops = [(f"stopping node {rank}", job, STOP_GRACE_S) for rank, job in jobs.items()]
        later = [(f"stopping the monitor of node {rank}", job, MONITOR_GRACE_S) for rank, job in monitors.items()]
        if signals.received() is not None:
            stops, later = stops + later, []
        for group in (stops, later):
            fan_out(lambda item: _tolerant(result, item[0], lambda: _stop_if_running(item[1], item[2])), group)
            if group is stops:
                self._exit_codes(jobs, result)
        self._cleanup(rnd, jobs, monitors, result)

    def _exit_codes(self, jobs: dict[int, Job], result: RoundResult) -> None:
        for rank, job in jobs.items():
            result.exit_codes[rank] = _tolerant(result, f"the exit code of node {rank}", job.poll)
            why = _tolerant(result, f"how node {rank} ended", job.ending)
            if why:
                result.endings[rank] = why

    def _cleanup(self, rnd: RoundPlan, jobs: dict[int, Job], monitors: dict[int, Job], result: RoundResult) -> None:
        """Each node's runtime cleanup, then the stopped jobs' parent-death guards, now idle."""
        for node in rnd.nodes:
            _tolerant(result, f"cleanup of node {node.node_rank}",
                      lambda node=node: self.runtimes.of(node).cleanup(node))
        for job in [*jobs.values(), *monitors.values()]:
            _tolerant(result, "closing a node's guard", job.close)

    def _fetch_logs(self, node: NodePlan, result: RoundResult) -> None:
        try:
            self.scheduler.fetch_logs(node)
        except (OSError, EOFError, ConnectionError) + _ssh_errors() as exc:  # a host whose connection died
            result.warnings.append(f"could not fetch the logs of node {node.node_rank} from "
                                   f"{node.host.name}:{node.remote_dir}: {exc}")

    def _allreduce_rows(self) -> list[dict]:
        """The stored collective micro attempts (``breakdown.COLLECTIVE_CASES``: all-reduce, all-gather,
        reduce-scatter, broadcast, reduce, all-to-all, sendrecv): the bus bandwidth the time breakdown prices
        communication and a pipeline's sends at."""
        if self.store is None:
            return []
        try:
            return [a.row for case in breakdown.COLLECTIVE_CASES
                    for a in self.store.attempts({"case": case, "status": "ok"})]
        except (StoreError, StoreUnavailable):  # the breakdown then says the figure is missing
            return []

    def _node_facts(self, case: CasePlan, node: NodePlan) -> dict:
        return {**self.runtimes.of(node).describe(case, node), **self.scheduler.node_facts(node),
                "probes": self.preflight.probed.get((node.host.name, case.hardware.vendor), {}),
                "devices": self.preflight.device_counts.get((node.host.name, case.hardware.spec.kind))}


def write_inputs(case: CasePlan, rnd: RoundPlan) -> None:
    rnd.dir.mkdir(parents=True, exist_ok=True)
    rnd.config_path.write_text(rnd.worker_config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    resolved = {
        "case_name": str(case.name),
        "case_file": str(case.case_file),
        "extern_config": str(case.extern_config) if case.extern_config else None,
        "workload": case.workload.model_dump(mode="json"),
        "set_by": {".".join(k): v for k, v in sorted(case.provenance.items())},
    }
    (rnd.dir / "resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")


def _stop_if_running(job: Job, grace_s: float) -> None:
    if job.poll() is None:
        job.stop(grace_s)


def _tolerant(result: RoundResult, what: str, action: Callable[[], object]) -> object:
    """``action()``, or None with a warning on the round when it raises (a node's engine or host is gone)."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - one node's failure must not stop the others' cleanup
        result.warnings.append(f"{what} failed: {type(exc).__name__}: {str(exc)[:300]}")
        return None


class StepWatcher:
    """Follows rank 0's live stdout for the latest step, to show progress, and for its end record."""

    def __init__(self, case: CasePlan, rnd: RoundPlan, node_dir: Optional[Path] = None):
        self.launcher, self.node_dir = launchers.of(case), node_dir or rnd.nodes[0].log_dir
        self.path: Optional[Path] = None
        self.offset = 0
        self.step: Optional[int] = None
        self.live: Optional[LiveStep] = None  # what rank 0 last reported of its step (tokens/s, loss)
        self.ended = False  # rank 0 finished measuring: the round is only exiting now

    def latest_step(self) -> Optional[int]:
        if self.path is None:
            self.path = self.launcher.live_stdout(self.node_dir, local_rank=0)
            if self.path is None:
                return self.step
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.step
        complete = chunk.rfind("\n") + 1
        self.offset += len(chunk[:complete].encode("utf-8", errors="replace"))
        for line in chunk[:complete].splitlines():
            try:
                record = perflog.parse_line(line)
            except perflog.PerfLogError:
                continue
            if isinstance(record, perflog.StepRecord):
                self.step, self.live = record.step, LiveStep.of(record)
            elif isinstance(record, perflog.EndRecord):
                self.ended = True
        return self.step

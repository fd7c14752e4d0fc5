"""A round's outcome: its logs read and analysed, its status classified, its result document written.

The document (``results.json``) is the round's record; the results store gets one row per attempt.
Over 300 lines: reading, classifying and writing one round share its plan and result; each part is short.
"""
from __future__ import annotations

import errno
import hashlib
import json
import shutil
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from dataclasses import replace
from typing import Callable, Optional, Sequence

from training.contract import batch

from run_benchmarks.results.figures import analyze
from run_benchmarks.results.checks import fairness as fairness_checks
from run_benchmarks.results.breakdown import step as breakdown, layouts as breakdown_layouts, ppo as breakdown_ppo
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.execute import contention, monitoring
from run_benchmarks import signals
from run_benchmarks.results.figures import task as task_figures
from run_benchmarks.pathnames import write_text_atomically
from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan
from run_benchmarks.results.rounds.record import CaseFacts, DeviceDefinition, Environment, RoundRecord, Status
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable, is_full
from run_benchmarks.results.rounds.workload import resolved_workload, workload_hash
from training.contract.tasks import task_of
from training.contract import perflog

# Out-of-memory words, case-blind: torch (OutOfMemoryError, "CUDA out of memory", the CPU allocator's "can't
# allocate memory"), Paddle (ResourceExhaustedError, "Fail to alloc memory" on a CPU), Slurm (OUT_OF_MEMORY).
_OOM_MARKERS = ("outofmemoryerror", "out of memory", "can't allocate memory", "resourceexhausted", "fail to alloc")


def is_out_of_memory(text: str) -> bool:
    return any(marker in text.lower() for marker in _OOM_MARKERS)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def finish(case: CasePlan, rnd: RoundPlan, result: RoundResult, outcome: str, began: float,
           node_facts: Callable[[NodePlan], dict], orchestrator_env: dict, all_logs: Sequence[collect.RankLogs],
           allreduce_rows: Sequence[dict] = ()) -> None:
    """Read every rank's logs (``all_logs``: gathered by the case's launcher), fill in ``result`` and write the
    round's results.json. ``outcome``: how the round ended (done, node_failed, timeout, interrupted, cancelled,
    start_failed);
    ``node_facts``: per node what preflight and its runtime know (probes, devices, image); ``allreduce_rows``:
    the stored ``allreduce`` attempts, which price the expected communication of the time breakdown."""
    ranks: list[collect.RankLog] = []
    figures = analyze.RoundAccumulator()
    steps_done = []
    for node in rnd.nodes:
        _remove_empty_tmp(node.log_dir / "tmp")
    spans = []  # each rank's measured steps on the wall clock: the window the monitor's figures are read over
    for rank in collect.read_ranks(list(all_logs)):
        figures.add(rank)
        steps_done.append(rank.steps_done)
        if rank.series.window is not None:
            spans.append(rank.series.window)
        rank.series = collect.StepSeries()  # folded in: its columns are not needed again
        ranks.append(rank)
    for rank in ranks:
        result.warnings += rank.problems
    try:
        combined = task_figures.round_figures(ranks)
        precision = case.workload.train.precision
        peak, basis = case.hardware.peak_tflops(precision)
        measured, measured_note = case.hardware.measured_peak_tflops(precision)
        combined += task_figures.mfu_figures(combined, [("mfu", peak, f"{case.hardware.name} {precision} "
                                                                      f"datasheet peak {basis}".strip()),
                                                        ("mfu_measured", measured, measured_note)])
        result.figures = [figure.to_dict() for figure in combined]
    except task_figures.FigureConflict as exc:
        result.warnings.append(f"task figures left out: {exc}")
    result.steps_completed = min(steps_done, default=0)
    monitored, contended = [], []
    measured_window = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
    for node in rnd.nodes:
        if node.monitor_argv is not None:
            figures_of_node, warnings = monitoring.summarize_node(node.monitor_dir, measured_window)
            monitored.append({"node_rank": node.node_rank, "host": node.host.name, **figures_of_node})
            result.warnings += [f"node {node.node_rank}: {w}" for w in warnings]
            contended.append({"node_rank": node.node_rank, "host": node.host.name, **contention.node_figures(
                node.monitor_dir, measured_window, _run_devices(case, rnd, node))})
    result.nodes = [
        {"node_rank": node.node_rank, "host": node.host.name,
         "exit_code": result.exit_codes.get(node.node_rank), "launcher_log": str(node.launcher_log),
         **node_facts(node),
         "environment": next((r.start.environment for r in ranks
                              if r.start and r.start.node_rank == node.node_rank and r.start.environment),
                             None)}
        for node in rnd.nodes
    ]
    classify(case, rnd, result, outcome, ranks, figures)
    result.warnings += fairness_checks.round_warnings(case.workload, result.metrics.to_dict() if result.metrics
                                                      else None, result.figures)  # constant inputs, padding
    if result.metrics is not None and task_of(case.workload.task).trains:
        _add_time_breakdown(case, ranks, result, allreduce_rows)
    if monitored:
        result.monitor = monitoring.summarize_round(
            monitored, result.metrics.tokens_per_s_total if result.metrics else None)
        result.monitor["contention"] = contention.judge(contended, case.contention)
        if contention.warning(result.monitor["contention"]):
            result.warnings.append(contention.warning(result.monitor["contention"]))
    if result.metrics is not None and result.metrics.time_breakdown is not None:
        result.metrics.time_breakdown["energy"] = monitoring.energy(result.monitor, result.metrics.tokens_per_s_total)
    result.ended_at = now()
    result.wall_time_s = time.monotonic() - began
    write_results(rnd.results_path, case, result, orchestrator_env)


def _run_devices(case: CasePlan, rnd: RoundPlan, node: NodePlan) -> list[int]:
    """The device indices the node's processes were given: the kind's visibility variable where the host pins
    them, else the first one per process."""
    variable = rnd.worker_config.runtime.device.visible_devices_env
    pinned = node.env.get(variable, "") if variable else ""
    listed = [int(d) for d in pinned.split(",") if d.strip().isdigit()]
    return listed or list(range(case.name.nprocs_per_node))


def classify(case: CasePlan, rnd: RoundPlan, result: RoundResult, outcome: str,
             ranks: list[collect.RankLog], figures: analyze.RoundAccumulator) -> None:
    complete = len(ranks) == case.name.world_size and all(r.finished for r in ranks)
    mismatch = collect.world_size_mismatch(
        ranks, case.name.world_size, f"{case.name.nnodes} node(s) x {case.name.nprocs_per_node} process(es)")
    if mismatch is not None and complete:  # no figure of another layout than the one named is kept
        result.status, result.reason = "failed", mismatch
        return
    if mismatch is not None:  # a round that failed anyway says it too
        result.warnings.append(mismatch)
    if complete:
        result.status, result.reason = "ok", ""
        for rank, code in sorted(result.exit_codes.items()):
            if code not in (0, None):
                result.warnings.append(f"node {rank} launcher exited with {code} after every rank had "
                                       "finished and reported; the figures are complete")
        if outcome == "timeout":
            result.warnings.append("the launcher outlived the deadline after every rank had finished")
        if not task_of(case.workload.task).trains:  # a micro-benchmark's figures are its result: it has no steps
            if not result.figures:
                result.status, result.reason = "failed", "no figures: every rank finished without reporting one"
            return
        peak, note = case.hardware.peak_tflops(case.workload.train.precision)
        try:
            samples = batch.global_batch(case.workload, case.name.world_size)  # a worker that reports none
            result.metrics = figures.metrics(peak, note, samples, case.hardware.memory_total_bytes,
                                             case.hardware.measured_peak_tflops(case.workload.train.precision))
            if result.metrics.recompiles:
                result.warnings.append(f"torch.compile built {result.metrics.recompiles} graph(s) inside measured "
                                       "steps: their step times include compilation (raise train.warmup_steps)")
        except analyze.NothingToMeasure as exc:
            result.status, result.reason = "failed", f"no figures: {exc}"
        return
    result.error_lines = collect.error_lines(ranks, [n.launcher_log for n in rnd.nodes])
    if outcome == "cancelled":  # by someone else (the scheduler's scancel, preemption): the reason says who
        result.status = "interrupted"
    elif outcome == "interrupted":
        received = signals.received()
        by = "Ctrl-C" if received in (None, signal.SIGINT) else signal.Signals(received).name
        result.status, result.reason = "interrupted", f"stopped by {by}; every node was stopped"
    elif outcome == "timeout":
        result.status = "timeout"
        result.reason += "; every node was stopped"
    else:
        text = "\n".join([*result.error_lines, *result.endings.values()])  # a scheduler may say it (Slurm's OOM)
        unsupported = [rank.unsupported.reason for rank in ranks if rank.unsupported is not None]
        if unsupported:
            result.status, result.reason = "unsupported", f"not supported on this device: {unsupported[0]}"
            return
        oom = is_out_of_memory(text)
        result.status = "oom" if oom else "failed"
        if outcome != "start_failed":
            result.reason = ("out of memory: " if oom else "") + _failure_reason(rnd.nodes, result.exit_codes, ranks,
                                                                                 result.endings)


def _add_time_breakdown(case: CasePlan, ranks: list[collect.RankLog], result: RoundResult,
                        allreduce_rows: Sequence[dict]) -> None:
    """``metrics.time_breakdown``, or a warning on the round where assembling it fails: a figure the round can
    do without never costs it its results.json."""
    try:
        result.metrics = replace(result.metrics, time_breakdown=_time_breakdown(case, ranks, result, allreduce_rows))
    except Exception as exc:  # noqa: BLE001 - whatever the ranks' records make the assembly raise
        result.warnings.append(f"time breakdown left out: {type(exc).__name__}: {exc}")


def _time_breakdown(case: CasePlan, ranks: list[collect.RankLog], result: RoundResult,
                    allreduce_rows: Sequence[dict]) -> dict:
    precision, name = case.workload.train.precision, case.name
    records = [record for r in ranks for record in r.breakdowns]
    if any(not r.breakdowns for r in ranks):
        records.append(perflog.BreakdownRecord(rank=-1, steps=0, not_measured=f"not measured for "
                                               f"{case.workload.task} (a rank reported no breakdown)"))
    peak, basis = case.hardware.peak_tflops(precision)
    command = f"accelbench run {{op}}:{name.framework}:{name.hardware}:{name.nnodes}:{name.nprocs_per_node}"
    peaks = (case.hardware.measured_peak_tflops(precision),
             (peak, f"{case.hardware.name} {precision} datasheet peak {basis}".strip()))
    if task_of(case.workload.task).phased:  # per phase of a learning update, and the whole update
        figures = {f["name"]: f["value"] for f in result.figures or [] if not f.get("params")}
        return breakdown_ppo.time_breakdown(records, result.metrics.to_dict(), case.workload, figures, *peaks,
                                            result.nodes, allreduce_rows, command)
    return breakdown.time_breakdown(records, result.metrics.to_dict(), *peaks, result.nodes, allreduce_rows, command,
                                    breakdown_layouts.tensor_parallel(case.workload, case.name.world_size,
                                                                      name.framework),
                                    framework=name.framework)


def _failure_reason(nodes: list[NodePlan], codes: dict[int, Optional[int]], ranks: list[collect.RankLog],
                    endings: Optional[dict[int, str]] = None) -> str:
    unfinished = [r.rank for r in ranks if not r.finished]
    endings = endings or {}
    bad = [f"node {n.node_rank} ({n.host.name}): " + endings[n.node_rank] if n.node_rank in endings
           else f"node {n.node_rank} ({n.host.name}) exited with {codes.get(n.node_rank)}"
           for n in nodes if n.node_rank in endings or codes.get(n.node_rank) not in (0, None)]
    parts = bad + ([f"rank(s) {', '.join(map(str, unfinished))} did not finish"] if unfinished else [])
    return "; ".join(parts) or "the workers ended without reporting"


def _remove_empty_tmp(path: Path) -> None:
    """The per-node TMPDIR goes once the launcher is gone; anything left there is kept for a look."""
    if path.is_dir():
        leftovers = [p for p in path.rglob("*") if p.is_file()]
        if not leftovers:
            shutil.rmtree(path, ignore_errors=True)


def result_document(case: CasePlan, result: RoundResult, orchestrator_env: dict) -> RoundRecord:
    """The round's record, as results.json and the store hold it."""
    workload = resolved_workload(case.name, case.workload)
    return RoundRecord(
        run_id=case.rounds[0].worker_config.runtime.run_id,
        case_name=result.case_name,
        case=CaseFacts(
            case=case.name.case, framework=case.name.framework, framework_version=case.name.framework_version,
            hardware=case.name.hardware, vendor=case.hardware.vendor, nnodes=case.name.nnodes,
            nprocs_per_node=case.name.nprocs_per_node, world_size=case.name.world_size, repeat=case.name.repeat,
            extern_config=str(case.extern_config) if case.extern_config else None,
            extern_config_hash=_file_sha256(case.extern_config)),
        round=result.round, status=Status(result.status), reason=result.reason, warnings=result.warnings,
        error_lines=result.error_lines, started_at=result.started_at, ended_at=result.ended_at,
        wall_time_s=result.wall_time_s, results_path=str(result.dir / "results.json"),
        steps_completed=result.steps_completed, metrics=result.metrics.to_dict() if result.metrics else None,
        monitor=result.monitor, figures=result.figures, workload=case.workload.model_dump(mode="json"),
        workload_hash=workload_hash(workload), compliance=case.compliance, device_definition=_device(case),
        environment=Environment(orchestrator=orchestrator_env, nodes=result.nodes, rendezvous=result.rendezvous,
                                # what history names as changed when the vendor's file changed (results/history)
                                vendor_file_sha256=_file_sha256(case.hardware.vendor_dir / "vendor.yaml"),
                                **({"leftovers": result.leftovers} if result.leftovers else {})))


def _device(case: CasePlan) -> Optional[DeviceDefinition]:
    """What one device of the round's hardware is, as its vendor file states it (not for the CPU)."""
    if case.hardware.on_cpu:
        return None
    accel = case.hardware.spec
    return DeviceDefinition(hardware=case.hardware.name, dies_per_device=accel.dies_per_device,
                            devices_per_card=accel.devices_per_card,
                            stated_in=f"vendors/{case.hardware.vendor}/vendor.yaml")


def _file_sha256(path: Optional[Path]) -> Optional[str]:
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class ResultsUnwritable(OSError):
    """A round's results.json could not be written (disk full, read-only): the run stops, since the rounds
    after it could not be recorded either. Raised after the attempt went to the store, where it could."""


def write_results(path: Path, case: CasePlan, result: RoundResult, orchestrator_env: dict) -> None:
    """results.json via a temporary file and a rename: a reader never sees half a file. When the write fails
    the temporary file goes, the failure becomes a warning and ``result.write_error``, and the round goes on to
    the store (which may still take it); store_attempt then stops the run."""
    result.record = result_document(case, result, orchestrator_env)
    document = result.record.document()
    try:
        write_text_atomically(path, json.dumps(document, indent=2, default=str) + "\n")
    except OSError as exc:
        result.write_error = exc
        result.warnings.append(f"{path} could not be written: {exc.strerror or exc}")
        # the record was made before the write: the store's row and the end-of-run table must say it too
        result.record = result.record.model_copy(update={"warnings": list(result.warnings)})
        _loud(f"round {result.round} of {result.case_name}: {path} could not be written: {exc.strerror or exc}")


def _loud(message: str) -> None:
    print(f"accelbench: WARNING: {message}", file=sys.stderr, flush=True)


def store_attempt(store: Optional[ResultStore], case: CasePlan, result: RoundResult, attempt: int,
                  orchestrator_env: dict, status: Optional[str] = None, results_path: Optional[Path] = None) -> None:
    """The attempt as a row of the results store (when there is one). A store that cannot take it (locked past
    its retry budget, full, damaged) is said loudly, noted in ``store.unstored`` (the run then exits
    non-zero and says how to repair) and in the round's results.json warnings, which keep the attempt for
    ``accelbench store repair``."""
    path = Path(results_path) if results_path else result.dir / "results.json"
    stored = False
    if store is not None:
        record = (result.record or result_document(case, result, orchestrator_env)).model_copy(
            update={"results_path": str(path), **({"status": Status(status)} if status else {})})
        try:
            store.add_attempt(record.to_row(attempt),
                              what=f"round {result.round} of {result.case_name}")
            stored = True
        except (StoreError, StoreUnavailable) as exc:
            why = getattr(exc, "reason", "") or str(exc).splitlines()[0]
            kept = result.write_error is None and path.is_file()
            warning = (f"this attempt is NOT in the results store {store.where}: {why}; "
                       + (f"add it from this file with: accelbench store repair --db {store.where} --log-root "
                          f"{_log_root_of(path)}" if kept else "and its results.json could not be written: "
                          "its figures are lost"))
            result.warnings.append(warning)
            store.unstored.append(f"round {result.round} of {result.case_name} (attempt {attempt}): {why}"
                                  + (f"; kept in {path}" if kept else "; lost"))
            _loud(f"round {result.round} of {result.case_name}: {warning}")
            if kept:
                _add_warning(path, warning)
            if is_full(exc) and result.write_error is None:
                raise ResultsUnwritable(errno.ENOSPC, f"the results store {store.where} is full: {why}") from None
    if result.write_error is not None:
        exc = result.write_error
        if stored:
            _loud(f"round {result.round} of {result.case_name}: the attempt is in the store {store.where}, not in "
                  f"a results.json; the run stops here")
        raise ResultsUnwritable(exc.errno or errno.EIO, f"{path} could not be written: {exc.strerror or exc}")


def _log_root_of(path: Path) -> Path:
    """logs/<run_id>/<case>/round<k>/results.json -> logs"""
    return path.parents[3] if len(path.parents) > 3 else path.parent


def _add_warning(path: Path, warning: str) -> None:
    """The warning into an already written results.json, so the file says what the store lacks."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        document["warnings"] = list(document.get("warnings") or []) + [warning]
        write_text_atomically(path, json.dumps(document, indent=2, default=str) + "\n")
    except (OSError, ValueError) as exc:
        _loud(f"could not add the warning to {path}: {exc}")

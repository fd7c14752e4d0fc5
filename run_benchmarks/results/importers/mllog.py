"""MLPerf training result logs (version 1): the ``:::MLLOG`` events, read through MLPerf's mlperf-logging.

Each line is one event, parsed by mlperf-logging's own parser behind accelbench's bounds (``mllog_events``).
What is stored, each figure with its source (``metrics["sources"]``):

- MLPerf's result: time to train = the first ``run_stop`` - the first ``run_start`` (as mlperf-logging's result
  summarizer scores it), ``run_stop``'s ``metadata.status`` (``success`` -> ok; anything else failed), and the
  quality metrics the rules score for the benchmark (the benchmark table, ``mlperf_benchmarks.yaml``): the last
  evaluation of each at or before ``run_stop`` (Stable Diffusion: FID and CLIP both, ``eval_metrics``; the
  first is ``eval_accuracy``), ``target_accuracy`` where the log states one, the rules' goal beside it.
- Throughput from the training intervals, read by the benchmark's row (``mllog_blocks``: refused with the
  reason where the log's keys do not fit it), over the intervals after the first ``skip_intervals`` (warm-up)
  unless that leaves none: samples/s, and tokens/s where the row says a sample is a sequence of
  ``max_sequence_length`` tokens (GPT-3's intervals count tokens: samples/s is tokens/s over the length).
  ``tracked_stats`` beside it (``mllog_tracked``).
- mlperf-logging's compliance verdict: which round's rules the log passes (``mllog_compliance``), and the
  ``:::SYSJSON`` system (accelerator, nodes, accelerators per node) an import of no case takes its layout from.

A benchmark the table does not hold is read by what its events state unambiguously: time to train, status,
evaluations, and ``samples_count`` positions; its other size keys are refused, never guessed.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from run_benchmarks.results.importers import CappedWarnings, Imported, clip, parser, whole
from run_benchmarks.results.importers import mllog_blocks, mllog_compliance
from run_benchmarks.results.importers.mllog_folder import Folder
from run_benchmarks.results.importers import mllog_events
from run_benchmarks.results.importers.mllog_events import SUBMISSION, Event, Log, read
from run_benchmarks.results.importers.mllog_tracked import Tracked
from run_benchmarks.results.importers.mlperf_table import Benchmark, table


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, timezone.utc).isoformat(timespec="seconds")


def _fail(result: Imported, why: str) -> None:
    result.status = "failed"
    result.reason = f"{result.reason}; {why}" if result.reason else why


def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    return imported(path, read_log(path), world_size, skip_intervals)


PARSER = parser("mllog", 1, "MLPerf :::MLLOG result logs through mlperf-logging (time to train, scored metrics, "
                            "throughput by the benchmark table, compliance)", folder=Folder())(parse)


def read_log(path: Path) -> tuple[Log, CappedWarnings, list[str]]:
    warnings, notes = CappedWarnings(), []
    return read(path, warnings, notes), warnings, notes


def imported(path: Path, read_: tuple[Log, CappedWarnings, list[str]], world_size, skip: int) -> Imported:
    log, warnings, notes = read_
    said = {e.key: e.value for e in log.events if e.key in SUBMISSION and e.value is not None}
    result = Imported(status="ok", metrics={"world_size": world_size}, details=dict(said))
    result.warnings = notes
    benchmark = said.get("submission_benchmark")
    found = table().find(benchmark if isinstance(benchmark, str) else None)
    row = found[1] if found else None
    result.details["mlperf_benchmark"] = found[0] if found else None
    result.stated = _stated(log, said, row)
    if log.system:
        result.details["system"] = log.system
    if log.bad_times:
        _fail(result, f"{log.first_bad}; such an event is no time stamp and was left out"
                      + (f" ({log.bad_times:,} events in all)" if log.bad_times > 1 else ""))
    if not log.parsed:
        _fail(result, "no figure in the log: no :::MLLOG line" + (" with a valid time" if log.bad_times else ""))
        result.warnings.extend(warnings.final())
        return result
    if log.overflow:
        _fail(result, f"the log holds more than {mllog_events.MAX_EVENTS:,} training and evaluation events ({log.overflow:,} "
                      "past them unread): its intervals are not read")
    if not found:
        warnings.add(f"benchmark {clip(repr(benchmark), 60)} is not in accelbench's MLPerf table "
                     "(mlperf_benchmarks.yaml): only what its events state unambiguously is read")
    stop = _result_of_the_run(result, log)
    _scores(result, log, row, stop, warnings)
    if not log.overflow:
        _throughput(result, log, row, skip, warnings)
    verdict = mllog_compliance.check(log.loglines, benchmark, log.unchecked)
    result.metrics["mlperf_rules"] = verdict.text
    result.details["mlperf_compliance"] = {"checked": verdict.checked, "passed": verdict.passed,
                                           "ruleset": verdict.ruleset, "tried": verdict.tried}
    result.warnings.extend(warnings.final())
    return result


def _stated(log: Log, said: dict, row: Optional[Benchmark]) -> dict:
    """What the log says ran: model (the benchmark), hardware and layout (SYSJSON), for an import of no case."""
    system = log.system
    stated = {"model": said.get("submission_benchmark"), "hardware": system.get("accelerator_model_name")
              or said.get("submission_platform"), "source": "the log's submission_benchmark and :::SYSJSON"}
    seq = _sequence(log, row)[0]
    if seq:
        stated["seq_len"] = seq
    if row is not None and row.tokens is None:  # no tokens at all: a case's sequence length is no reading of it
        stated["no_tokens"] = f"the benchmark table says {row.sources['tokens']}"
    nodes, per_node = (whole(_int(system.get(k))) for k in ("number_of_nodes", "accelerators_per_node"))
    if nodes and per_node:
        stated["nnodes"], stated["nprocs_per_node"] = nodes, per_node
        stated["layout_source"] = f"the log's :::SYSJSON ({nodes} node(s) x {per_node})"
    return stated


def _int(text):
    return int(text) if isinstance(text, str) and text.strip().isdigit() else text


def _setting(log: Log, key: str) -> Optional[int]:
    found = [e.value for e in log.values(key) if e.value is not None]
    return int(found[-1]) if found else None


def _sequence(log: Log, row: Optional[Benchmark]) -> tuple[Optional[int], str]:
    """Tokens per sample, and where from: only where the table says a sample is a language-model sequence."""
    if row is None or row.tokens != "max_sequence_length":
        return None, ""
    logged = _setting(log, "max_sequence_length")
    if logged:
        return logged, f"max_sequence_length {logged:,} (log)"
    return row.sequence_length, f"sequence length {row.sequence_length:,} (the rules' fixed length; the log states none)"


def _result_of_the_run(result: Imported, log: Log) -> Optional[Event]:
    """MLPerf's own figures: time to train (the summarizer's first run_start and run_stop), the status."""
    start, stop = log.first("run_start"), log.first("run_stop")
    status = stop.meta.get("status", "success") if stop is not None else None
    if start is not None:
        result.started_at = _iso(start.time_ms)
    if stop is not None:
        result.ended_at = _iso(stop.time_ms)
        if status != "success":
            said = repr(clip(status, 60)) if isinstance(status, str) else f"of type {type(status).__name__}"
            _fail(result, f"run_stop status {said}")
    else:
        _fail(result, "no run_stop event: the run did not end")
    m = result.metrics
    if start is not None and stop is not None:
        result.wall_time_s = m["time_to_train_s"] = (stop.time_ms - start.time_ms) / 1000
        result.source("time_to_train_s", f"log: run_stop - run_start, MLPerf's score (run_stop status "
                      f"{clip(str(status), 60)}" + (": the run reached its quality target)" if status == "success"
                                                     else ")"))
        m["run_status"] = clip(str(status), 60)
    batch = _setting(log, "global_batch_size")
    if batch:
        m["samples_per_step"] = batch
        result.source("samples_per_step", "log: global_batch_size")
    target = [e.value for e in log.values("target_accuracy") if isinstance(e.value, float)]
    if target:
        m["eval_target"] = target[-1]
        result.source("eval_target", "log: target_accuracy")
    return stop


def _scores(result: Imported, log: Log, row: Optional[Benchmark], stop: Optional[Event],
            warnings: CappedWarnings) -> None:
    """The last evaluation of each scored metric at or before run_stop (later ones are not the run's)."""
    evals = [e for e in log.values("eval_accuracy") if e.value is not None]
    late = [e for e in evals if stop is not None and e.time_ms > stop.time_ms]
    if late:
        warnings.add(f"{len(late)} evaluation(s) logged after run_stop: not the run's, left out of its score")
    evals = [e for e in evals if e not in late]
    specs = row.metrics if row is not None else None
    found: dict[str, tuple[float, Event]] = {}
    for event in evals:
        for name, value in _metric_values(event, specs):
            found[name] = (value, event)
    if specs and evals and not found:
        warnings.add("the log's evaluations name none of the metrics the rules score ("
                     + ", ".join(m.metric or m.field or m.name for m in specs) + "): no score read")
    if not found:
        return
    m, goals = result.metrics, {s.name: s.goal for s in specs or () if s.goal}
    ordered = [s.name for s in specs if s.name in found] if specs else list(found)
    first, event = found[ordered[0]]
    m["eval_accuracy"] = first
    at = event.meta.get("samples_count", event.meta.get("epoch_num"))
    result.details["eval_samples_count"] = whole(at)
    where = f" at {at:,}" if isinstance(at, (int, float)) else ""
    result.source("eval_accuracy", f"log: the last eval_accuracy{where}, {ordered[0]}"
                  + (f" (the rules' goal {goals[ordered[0]]})" if ordered[0] in goals else ""))
    if specs or len(found) > 1:
        m["eval_metrics"] = {name: found[name][0] for name in ordered}
        m["eval_goals"] = {name: goals[name] for name in ordered if name in goals}
        result.source("eval_metrics", "log: the last evaluation of each metric the rules score, at or before "
                                      "run_stop (mlperf_benchmarks.yaml: " + "; ".join(ordered) + ")")


def _metric_values(event: Event, specs) -> list[tuple[str, float]]:
    value = event.value
    if specs is None:
        name = event.meta.get("metric") if isinstance(event.meta.get("metric"), str) else "eval_accuracy"
        return [(name, value)] if isinstance(value, float) else []
    out = []
    for spec in specs:
        if spec.metric is not None:
            if event.meta.get("metric") == spec.metric and isinstance(value, float):
                out.append((spec.name, value))
        elif spec.field is not None:
            if isinstance(value, dict) and spec.field in value:
                out.append((spec.name, value[spec.field]))
            elif isinstance(value, float) and len(specs) == 1:
                out.append((spec.name, value))
        elif isinstance(value, float):
            out.append((spec.name, value))
    return out


def _throughput(result: Imported, log: Log, row: Optional[Benchmark], skip: int, warnings: CappedWarnings) -> None:
    m = result.metrics
    batch = _setting(log, "global_batch_size")
    seq, seq_said = _sequence(log, row)
    reading = mllog_blocks.read(log, row, batch, seq)
    for note in reading.notes:
        warnings.add(note)
    if row is None and _setting(log, "max_sequence_length"):
        warnings.add("max_sequence_length is not read as tokens: the benchmark is not in the table, and a "
                     "recommender's history length reads the same (no tokens/s)")
    kind, n = reading.kind, len(reading.amounts)
    result.details.update({f"{kind}s": n, "skipped": skip, "unit": reading.unit or None})
    if reading.refused:
        _fail(result, f"no throughput: {reading.refused}")
    rate, first = None, 0
    if n and not reading.refused:
        first = skip if n > skip else 0
        if n <= skip:
            warnings.add(f"the log has {n} {kind}(s): kept whole, its warm-up inside (the {skip} warm-up {kind}(s) of "
                         "--skip-intervals would leave none)")
        rate = math.fsum(reading.amounts[first:]) / math.fsum(reading.seconds[first:])
        how = f"the log's {kind}s ({n - first} of {n}): {reading.how}, over their training time"
        if reading.unit == "tokens":
            m["tokens_per_s_total"] = rate
            result.source("tokens_per_s_total", f"derived from {how}")
            rate = rate / seq
            how += f", / {seq_said}"
        elif seq:
            m["tokens_per_s_total"] = rate * seq
            result.source("tokens_per_s_total", f"derived: samples/s x {seq_said}")
        m["samples_per_s"] = rate
        result.source("samples_per_s", f"derived from {how}")
    elif not reading.refused:
        warnings.add(f"no throughput: no {kind} with an amount the table's keys state")
    own_starts = reading.starts or [e.index for e in log.events if e.key == f"{kind}_start"]
    notes: list[str] = []
    Tracked.of(log.events, own_starts).figures(result, first, rate, notes)
    for note in notes:
        warnings.add(note)

"""MLPerf training logs (version 1): the ``:::MLLOG {json}`` lines mlperf_logging's mllog writes.

Each line is one event: ``{"namespace", "time_ms", "event_type", "key", "value", "metadata"}``. What each
figure is read from (``metrics["sources"]`` names it for every figure stored):

- MLPerf's own result: time to train = ``run_stop`` - ``run_start`` (s), the last ``eval_accuracy`` (the
  quality metric the benchmark's rules name: an accuracy, or a loss or perplexity), ``target_accuracy``
  where the log states one, and ``run_stop``'s ``metadata.status`` (``success``: the run reached its
  target -> ok; ``aborted`` or anything else -> failed).
- Throughput from the training blocks (``mllog_blocks``: what a block's keys count is cross-checked, and a
  log whose keys disagree has none, the attempt failed with the reason), over the blocks after the first
  ``skip_intervals`` (warm-up: compilation, first batches), unless that would leave none: a log of one
  block keeps it, saying its warm-up is inside. Samples/s, and tokens/s where the log counts tokens or
  states ``max_sequence_length`` (else the case's sequence length, stated as such by ``case_facts``).
- ``tracked_stats``: ``throughput`` (samples/s, the log's own measurement: kept as ``samples_per_s_logged``,
  and the headline where the blocks include the warm-up, as BERT's one block does), ``train_step_time``
  (step time), ``reduced_train_loss`` (loss), ``max_memory_usage`` (peak memory, GiB: the log names no
  unit). Other keys (``validation_throughput``, ...) are not training figures and are left alone.
- ``global_batch_size`` (samples per step), the ``submission_*`` fields, and ``:::SYSJSON`` (the system
  description a submission's log carries: accelerator, nodes, accelerators per node), which an import
  that names no case takes its hardware and layout from.

The mlperf-logging package (PyPI) writes these lines and checks a submission's rules, but computes no
throughput; this reads the JSON itself. Hostile or broken lines: the log is read as a stream (a line over
the cap is skipped) and only a few numbers per block are kept. A line whose JSON does not parse or whose
event lacks a text ``key`` is left out with a warning (the first 20 kept, the rest counted); an event whose
``time_ms`` is no time (nan, infinite, negative, past the year 9999) is left out and fails the import; a
value of the wrong type is left out with a warning.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from run_benchmarks.results.importers import CappedWarnings, Imported, clip, number, read_lines, parser, whole
from run_benchmarks.results.importers.mllog_blocks import Keys, Timeline, Tracked, read

MARK, SYSTEM = ":::MLLOG ", ":::SYSJSON "
SUBMISSION = ("submission_benchmark", "submission_org", "submission_platform", "submission_division",
              "submission_status")
COUNTS = ("global_batch_size", "max_sequence_length", "train_samples", "trained_samples",
          "opt_learning_rate_decay_steps", "opt_learning_rate_training_steps")
SYSTEM_FIELDS = ("system_name", "accelerator_model_name", "number_of_nodes", "accelerators_per_node",
                 "accelerator_memory_capacity", "framework")
LAST_TIME_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, the last time a datetime holds
AGREE = 0.10  # the blocks' samples/s and tracked_stats' own: a difference past this is a warning


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, timezone.utc).isoformat(timespec="seconds")


def _bad_time(time_ms) -> str:
    """Why ``time_ms`` (ms since 1970) is no time stamp, or ''."""
    if not math.isfinite(time_ms):
        return "is not finite"
    if time_ms < 0:
        return "is negative (a time stamp counts ms since 1970)"
    if time_ms > LAST_TIME_MS:
        return "is past the year 9999"
    return ""


def parse(path: Path, world_size, skip_intervals: int = 1) -> Imported:
    warnings = CappedWarnings()
    read_notes: list[str] = []
    blocks, epochs, tracked = Timeline("block"), Timeline("epoch"), Tracked()
    start_ms = stop_ms = stop_status = None
    last: dict = {}  # the last value of each key read below (eval_accuracy: the final one)
    after_start: dict = {}  # train_samples / trained_samples logged after run_start: the run's total
    system: dict = {}
    bad_times, first_bad, events = 0, "", 0
    for line_number, line in enumerate(read_lines(path, read_notes), 1):
        at = line.find(MARK)
        where = f"{path}:{line_number}"
        if at < 0:
            if not system and (at := line.find(SYSTEM)) >= 0:
                system = _system(line[at + len(SYSTEM):], warnings, where)
            continue
        try:
            event = json.loads(line[at + len(MARK):])
        except ValueError as exc:  # JSONDecodeError, or an integer of more digits than Python converts
            warnings.add(f"{where}: not valid JSON after {MARK.strip()}: {clip(str(exc))}")
            continue
        except RecursionError:
            warnings.add(f"{where}: JSON after {MARK.strip()} nested deeper than Python parses; left out")
            continue
        key = event.get("key") if isinstance(event, dict) else None
        time_ms = number(event.get("time_ms")) if isinstance(event, dict) else None
        if not isinstance(key, str) or time_ms is None:
            warnings.add(f"{where}: an event needs a text key and a numeric time_ms; left out")
            continue
        if why := _bad_time(time_ms):
            bad_times += 1
            first_bad = first_bad or f"{where}: {clip(key, 40)} time_ms {time_ms:,.6g} {why}"
            continue
        events += 1
        metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        value = event.get("value")
        if key == "run_start" and start_ms is None:
            start_ms = time_ms
        elif key == "run_stop":
            stop_ms, stop_status = time_ms, metadata.get("status", "success")
        elif key in SUBMISSION:
            if value is None or isinstance(value, (str, int, float, bool)):
                last[key] = clip(value, 200) if isinstance(value, str) else value
            else:
                warnings.add(f"{where}: {key} is a {type(value).__name__}, not a text; left out")
        elif key in COUNTS or key in ("eval_accuracy", "target_accuracy"):
            read_value = whole(value) if key in COUNTS else number(value)
            if read_value is None or (key in COUNTS and read_value <= 0):
                said = clip(repr(value), 60) if value is None or isinstance(value, (str, int, float)) else \
                    f"(a {type(value).__name__})"
                warnings.add(f"{where}: {key} {said} is not a "
                             + ("positive whole number" if key in COUNTS else "number") + "; left out")
            else:
                last[key] = read_value
                if key in ("train_samples", "trained_samples") and start_ms is not None:
                    after_start[key] = read_value
                if key == "eval_accuracy":
                    last["eval_at"] = whole(metadata.get("samples_count", metadata.get("epoch_num")))
        elif key == "tracked_stats" and isinstance(value, dict):
            tracked.add(value, len(blocks))
        blocks.event(key, time_ms, metadata, warnings, where)
        epochs.event(key, time_ms, metadata, warnings, where)
    result = Imported(status="ok", metrics={"world_size": world_size},
                      details={k: last[k] for k in SUBMISSION if k in last})
    result.warnings = read_notes
    result.stated = _stated(last, system)
    if system:
        result.details["system"] = system
    if bad_times:
        result.status = "failed"
        result.reason = (f"{first_bad}; such an event is no time stamp and was left out"
                         + (f" ({bad_times:,} events in all)" if bad_times > 1 else ""))
    if not events:
        _fail(result, f"no figure in the log: no {MARK.strip()} line" + (" with a valid time" if bad_times else ""))
        result.warnings.extend(warnings.final())
        return result
    _result_of_the_run(result, start_ms, stop_ms, stop_status, last)
    timeline = blocks if len(blocks) else epochs
    keys = Keys(batch=last.get("global_batch_size"), seq=last.get("max_sequence_length"),
                total=after_start.get("trained_samples", after_start.get("train_samples")),
                per_epoch=last.get("train_samples") if not after_start else None,
                schedule=last.get("opt_learning_rate_decay_steps", last.get("opt_learning_rate_training_steps")))
    _throughput(result, timeline, keys, tracked, skip_intervals, warnings)
    result.warnings.extend(warnings.final())
    return result


PARSER = parser("mllog", 1, "MLPerf :::MLLOG JSON lines (run_start/run_stop, blocks, eval_accuracy, "
                            "tracked_stats)")(parse)


def _system(text: str, warnings: CappedWarnings, where: str) -> dict:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        warnings.add(f"{where}: not valid JSON after {SYSTEM.strip()}; left out")
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: clip(str(data[k]), 100) for k in SYSTEM_FIELDS if isinstance(data.get(k), (str, int))}


def _stated(last: dict, system: dict) -> dict:
    """What the log says ran: model (the benchmark), hardware and layout (SYSJSON), for an import of no case."""
    stated = {"model": last.get("submission_benchmark"), "hardware": system.get("accelerator_model_name")
              or last.get("submission_platform"), "source": "the log's submission_benchmark and :::SYSJSON"}
    if last.get("max_sequence_length"):
        stated["seq_len"] = last["max_sequence_length"]
    nodes, per_node = (whole(_int(system.get(k))) for k in ("number_of_nodes", "accelerators_per_node"))
    if nodes and per_node:
        stated["nnodes"], stated["nprocs_per_node"] = nodes, per_node
    return stated


def _int(text):
    return int(text) if isinstance(text, str) and text.strip().isdigit() else text


def _result_of_the_run(result: Imported, start_ms, stop_ms, stop_status, last: dict) -> None:
    """MLPerf's own figures: time to train, the last evaluation, the status, the target where stated."""
    if start_ms is not None:
        result.started_at = _iso(start_ms)
    if stop_ms is not None:
        result.ended_at = _iso(stop_ms)
        if stop_status != "success":
            said = (repr(clip(stop_status, 60)) if isinstance(stop_status, str)
                    else f"of type {type(stop_status).__name__}")
            _fail(result, f"run_stop status {said}")
    else:
        _fail(result, "no run_stop event: the run did not end")
    m = result.metrics
    status = f"run_stop status {clip(str(stop_status), 60)}" if stop_ms is not None else "no run_stop"
    if start_ms is not None and stop_ms is not None:
        result.wall_time_s = m["time_to_train_s"] = (stop_ms - start_ms) / 1000
        result.source("time_to_train_s", f"log: run_stop - run_start, MLPerf's score ({status}"
                      + (": the run reached its quality target)" if stop_status == "success" else ")"))
    if "global_batch_size" in last:
        m["samples_per_step"] = last["global_batch_size"]
        result.source("samples_per_step", "log: global_batch_size")
    if "eval_accuracy" in last:
        m["eval_accuracy"], m["run_status"] = last["eval_accuracy"], clip(str(stop_status), 60)
        result.details["eval_samples_count"] = last.get("eval_at")
        at = f" at {last['eval_at']:,}" if last.get("eval_at") is not None else ""
        result.source("eval_accuracy", f"log: the last eval_accuracy{at} (the benchmark's quality metric; {status})")
    if "target_accuracy" in last:
        m["eval_target"] = last["target_accuracy"]
        result.source("eval_target", "log: target_accuracy")


def _throughput(result: Imported, timeline: Timeline, keys: Keys, tracked: Tracked, skip: int,
                warnings: CappedWarnings) -> None:
    m, kind = result.metrics, timeline.kind
    reading = read(timeline, keys)
    for note in reading.notes:
        warnings.add(note)
    if reading.refused:
        _fail(result, f"no throughput: {reading.refused}")
    measured = slice(skip, None) if len(reading.amounts) > skip else slice(0, None)
    if reading.amounts and len(reading.amounts) <= skip:
        warnings.add(f"the log has {len(reading.amounts)} {kind}(s): kept whole, its warm-up inside (the "
                     f"{skip} warm-up {kind}(s) of --skip-intervals would leave none)")
    result.details.update({f"{kind}s": len(reading.amounts), "tracked_stats": len(tracked.throughput),
                           "skipped": skip, "unit": reading.unit or None})
    rate = None
    if reading.amounts and not reading.refused:
        amount, seconds = math.fsum(reading.amounts[measured]), math.fsum(reading.seconds[measured])
        rate, used = amount / seconds, len(reading.amounts[measured])
        how = f"the log's {kind}s ({used} of {len(reading.amounts)}): {reading.how}, over their training time"
        if reading.unit == "tokens":
            m["tokens_per_s_total"] = rate
            result.source("tokens_per_s_total", f"derived from {how}")
            rate = rate / keys.seq
            how += f", / max_sequence_length {keys.seq:,}"
        m["samples_per_s"] = rate
        result.source("samples_per_s", f"derived from {how}")
    logged = tracked.throughput[skip:] if len(tracked.throughput) > skip else tracked.throughput
    if logged:
        own = math.fsum(logged) / len(logged)
        m["samples_per_s_logged"] = own
        result.source("samples_per_s_logged", f"log: tracked_stats throughput, mean of {len(logged)}")
        whole_run = bool(reading.amounts) and len(reading.amounts) <= skip
        if not reading.refused and (rate is None or whole_run):
            if rate is not None:
                m["samples_per_s_blocks"] = rate
                result.source("samples_per_s_blocks", result.metrics["sources"].pop("samples_per_s"))
            m["samples_per_s"] = m.pop("samples_per_s_logged")
            result.source("samples_per_s", f"log: tracked_stats throughput, mean of {len(logged)} (the log's "
                                           "own measurement)")
            result.metrics["sources"].pop("samples_per_s_logged")
            m.pop("tokens_per_s_total", None)
        elif rate is not None and abs(own / rate - 1) > AGREE:
            warnings.add(f"the {kind}s give {rate:,.4g} samples/s, the log's tracked_stats {own:,.4g} "
                         f"({own / rate - 1:+.1%}, past {AGREE:.0%})")
    if m.get("samples_per_s") is not None and keys.seq and m.get("tokens_per_s_total") is None:
        m["tokens_per_s_total"] = m["samples_per_s"] * keys.seq
        result.source("tokens_per_s_total", f"samples/s x max_sequence_length {keys.seq:,} (log)")
    if m.get("samples_per_s") is None and not reading.refused:
        warnings.add(f"no throughput: {len(reading.amounts)} {kind}(s) with an amount and "
                     f"{len(tracked.throughput)} tracked_stats throughput value(s)")
    tracked.figures(result, skip, len(timeline))


def _fail(result: Imported, why: str) -> None:
    result.status = "failed"
    result.reason = f"{result.reason}; {why}" if result.reason else why

"""An MLPerf result log's events, read through MLPerf's own parser behind accelbench's bounds.

mlperf-logging (the ``mlperf`` extra) parses each ``:::MLLOG`` line (``mlp_parser``: the same reading its
compliance checker and result summarizer use). It reads a whole file into memory, lets a line that is not its
JSON raise and strips a line with a regex quadratic in its length, so the log reaches it only through
``read_lines`` (a stream in bounded chunks, a line over the cap skipped unread), one line at a time, cut at its
marker here, each failure caught and warned about (the first 20 kept). What is
kept is bounded too: a few numbers per event of the keys the figures use (``KEEP``), at most ``MAX_EVENTS`` of
them, and the package's own lines (for its compliance rules) up to ``MAX_CHECKED_BYTES``; past either, the log
is still read for what it states, and the result says what was left unread.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from run_benchmarks.errors import UserError
from run_benchmarks.results.importers import CappedWarnings, clip, number, read_lines, whole

MARK, SYSTEM = ":::MLLOG ", ":::SYSJSON "
INSTALL = "pip install 'accelbench[mlperf]'  (MLPerf's mlperf-logging==4.1.68)"
INTERVALS = ("block_start", "block_stop", "epoch_start", "epoch_stop", "eval_start", "eval_stop", "eval_accuracy",
             "run_start", "run_stop")
COUNTS = ("global_batch_size", "max_sequence_length", "train_samples", "trained_samples")
SETTINGS = COUNTS + ("target_accuracy",)
SUBMISSION = ("submission_benchmark", "submission_org", "submission_platform", "submission_division",
              "submission_status")
KEEP = frozenset(INTERVALS + SETTINGS + SUBMISSION + ("tracked_stats",))
META = ("samples_count", "epoch_num", "first_epoch_num", "epoch_count", "metric", "status")
TRACKED = ("throughput", "train_step_time", "reduced_train_loss", "max_memory_usage")
SYSTEM_FIELDS = ("system_name", "accelerator_model_name", "number_of_nodes", "accelerators_per_node",
                 "accelerator_memory_capacity", "framework")
MAX_EVENTS = 100_000  # training and evaluation events kept (a real result log has a few hundred)
MAX_CHECKED_BYTES = 32 << 20  # the package's lines kept for its compliance rules ...
MAX_CHECKED_LINES = 50_000  # ... and how many (each a parsed JSON object: some hundred bytes beside its text)
MAX_DICT = 16  # numbers kept of one dict value (an eval_accuracy {BBOX, SEGM}, a tracked_stats)
LAST_TIME_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, the last time a datetime holds


@dataclass(slots=True)
class Event:
    """One kept event: its place in the file, key, time (ms since 1970), value and the metadata read."""

    index: int
    key: str
    time_ms: float
    value: Any
    meta: dict


@dataclass
class Log:
    events: list[Event] = field(default_factory=list)
    loglines: Optional[list] = field(default_factory=list)  # the package's LogLines; None: too many to keep
    unchecked: str = ""  # why loglines is None
    system: dict = field(default_factory=dict)
    parsed: int = 0  # events the package parsed with a valid time
    overflow: int = 0  # events past MAX_EVENTS, not kept
    bad_times: int = 0
    first_bad: str = ""

    def first(self, key: str) -> Optional[Event]:
        return next((e for e in self.events if e.key == key), None)

    def values(self, key: str) -> list[Event]:
        return [e for e in self.events if e.key == key]


def package():
    """mlperf-logging's line parser, or the install line when the extra is missing."""
    try:
        from mlperf_logging.compliance_checker.mlp_parser import ruleset_610
    except ImportError:
        raise UserError("reading an MLPerf log (--format mllog) needs MLPerf's mlperf-logging package, which is "
                        "not installed", INSTALL) from None
    return ruleset_610


def read(path: Path, warnings: CappedWarnings, notes: list[str]) -> Log:
    parser = package()
    log, checked_bytes = Log(), 0
    for number_, line in enumerate(read_lines(path, notes), 1):
        where = f"{path}:{number_}"
        if MARK not in line:
            if not log.system and SYSTEM in line:
                log.system = _system(line[line.index(SYSTEM) + len(SYSTEM):], warnings, where)
            continue
        logline = _parse(parser, line, where, warnings)
        if logline is None:
            continue
        logline.lineno = number_
        if not _valid(logline, log, where, warnings):
            continue
        log.parsed += 1
        if log.loglines is not None:
            checked_bytes += len(logline.full_string)
            if checked_bytes > MAX_CHECKED_BYTES or len(log.loglines) >= MAX_CHECKED_LINES:
                log.loglines, log.unchecked = None, (f"its MLLOG lines pass {MAX_CHECKED_LINES:,} or "
                                                     f"{MAX_CHECKED_BYTES >> 20} MiB, more than the compliance rules "
                                                     "are run on")
            else:
                log.loglines.append(logline)
        if logline.key in KEEP:
            if len(log.events) >= MAX_EVENTS:
                log.overflow += 1
            else:
                log.events.append(_event(logline, where, warnings))
    return log


def _parse(parser, line: str, where: str, warnings: CappedWarnings):
    """The package's LogLine of one line (its string_to_logline), or None with a warning: the package lets a missing
    field or a value of the wrong type raise, and JSON nested too deep recurse. What comes before the marker is
    cut as the package's strip_and_dedup cuts it (up to the last marker), by rfind: its regex ``.*:::MLLOG `` takes
    time quadratic in the length of a line that holds one marker (seconds for 40 kB, hours for a 1 MB line)."""
    text = line[line.rfind(MARK):].strip()
    try:
        return parser.string_to_logline(0, text)
    except RecursionError:
        warnings.add(f"{where}: JSON after {MARK.strip()} nested deeper than Python parses; left out")
    except ValueError as exc:  # JSONDecodeError, an integer of more digits than Python converts, a time no float
        if str(exc).startswith("could not convert"):
            warnings.add(f"{where}: an event needs a text key and a numeric time_ms; left out")
        else:
            warnings.add(f"{where}: not valid JSON after {MARK.strip()}: {clip(str(exc))}")
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        warnings.add(f"{where}: an event needs a text key, a numeric time_ms, a value and a metadata object "
                     f"(mlperf-logging's parser: {type(exc).__name__} {clip(str(exc), 40)}); left out")
    return None


def _valid(logline, log: Log, where: str, warnings: CappedWarnings) -> bool:
    """A key that is text, metadata that is a dict and a time that is one (else left out, a time failing
    the import: a log whose clock is broken has no figure to trust)."""
    if not isinstance(logline.key, str):
        warnings.add(f"{where}: an event needs a text key and a numeric time_ms; left out")
        return False
    if not isinstance(logline.value.get("metadata"), dict):
        warnings.add(f"{where}: {clip(logline.key, 40)}'s metadata is not an object; left out")
        return False
    time_ms = logline.timestamp
    why = ("is not finite" if not math.isfinite(time_ms) else "is negative (a time stamp counts ms since 1970)"
           if time_ms < 0 else "is past the year 9999" if time_ms > LAST_TIME_MS else "")
    if why:
        log.bad_times += 1
        log.first_bad = log.first_bad or f"{where}: {clip(logline.key, 40)} time_ms {time_ms:,.6g} {why}"
        return False
    return True


def _event(logline, where: str, warnings: CappedWarnings) -> Event:
    raw, meta = logline.value.get("value"), logline.value["metadata"]
    kept = {k: meta[k] for k in META if isinstance(meta.get(k), (int, float, str)) and not isinstance(meta[k], bool)}
    kept = {k: clip(v, 60) if isinstance(v, str) else v for k, v in kept.items()}
    key = logline.key
    if key in SUBMISSION:
        value = clip(raw, 200) if isinstance(raw, str) else raw if isinstance(raw, (int, float, bool)) else None
        if raw is not None and value is None:
            warnings.add(f"{where}: {key} is a {type(raw).__name__}, not a text; left out")
    elif key in ("eval_accuracy", "tracked_stats") and isinstance(raw, dict):
        names = TRACKED if key == "tracked_stats" else raw
        value = {str(k)[:40]: number(raw[k]) for k in list(names)[:MAX_DICT]
                 if k in raw and number(raw[k]) is not None}
        if not value and key == "eval_accuracy":
            warnings.add(f"{where}: eval_accuracy (a dict) holds no number; left out")
            value = None
    else:
        value = whole(raw) if key in COUNTS else number(raw)
        if key in COUNTS and value is not None and value <= 0:
            value = None
        if value is None and key in SETTINGS + ("eval_accuracy",):
            said = clip(repr(raw), 60) if raw is None or isinstance(raw, (str, int, float)) else \
                f"(a {type(raw).__name__})"
            warnings.add(f"{where}: {key} {said} is not a "
                         + ("positive whole number" if key in COUNTS else "number") + "; left out")
    return Event(logline.lineno, key, logline.timestamp, value, kept)


def _system(text: str, warnings: CappedWarnings, where: str) -> dict:
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        warnings.add(f"{where}: not valid JSON after {SYSTEM.strip()}; left out")
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: clip(str(data[k]), 100) for k in SYSTEM_FIELDS if isinstance(data.get(k), (str, int))}

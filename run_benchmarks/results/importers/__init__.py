"""Versioned parsers for logs other tools write, so their results can sit beside accelbench's.

A parser is registered under ``<format>/<version>`` (parsers.py); ``accelbench import --format paddlenlp``
takes the newest version of a format, ``paddlenlp/1`` pins one. Each reads one log file into an
``Imported``: the same figure names as accelbench's own metrics (so reports and comparisons treat
both alike), a status, and what the log says about where it ran.

Beside bundle/ (both bring results from elsewhere), below the views: an import is made a round record
(rounds/) with its figures derived and checked as a run's are (figures/); the CLI stores it.
"""
from __future__ import annotations

import functools
import math
import os
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from run_benchmarks.errors import UserError
from run_benchmarks.results.rounds.record import CaseFacts, Environment, RoundRecord, Status

if TYPE_CHECKING:
    from run_benchmarks.catalog.casename import CaseName


@dataclass
class Imported:
    status: str  # ok | failed
    # RoundMetrics names (tokens_per_s_per_device, samples_per_s, peak_memory_bytes {max},
    # peak_memory_reserved_bytes {max}, ...), plus what only imports carry: time_to_train_s, eval_accuracy,
    # and a tool's own FLOP counts as tflops_per_device_logged / mfu_logged (case_facts.complete adds ours)
    metrics: dict
    reason: str = ""
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    wall_time_s: Optional[float] = None
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # whatever else the log states (platform, benchmark, ...)
    # what the log says ran, for an import that names no case: model, hardware, nnodes, nprocs_per_node
    stated: dict = field(default_factory=dict)

    def source(self, key: str, text: str) -> None:
        """Where figure ``key`` comes from, kept with it (``metrics["sources"]``): ``log: ...`` (the log states
        it), ``derived from ...`` (accelbench's arithmetic on the log's values), ``case ...`` (the named case's
        formula or numbers), ``assumption: ...``."""
        self.metrics.setdefault("sources", {})[key] = text

    def record(self, run_id: str, name: "CaseName", index: int, vendor: Optional[str],
               extern_config: Optional[str], path: Path, parser: str,
               overrides: Optional[dict] = None) -> RoundRecord:
        """The imported log as a round record, like a run's: what ran comes from the case name given, and
        ``overrides`` (``--set model.seq_len=8192``) from what the import changed of it: kept in the metrics
        (an import stores no workload), so two imports of one case with other overrides never share a row."""
        where = str(Path(path).resolve())
        if overrides:
            self.metrics["overrides"] = dict(overrides)
        return RoundRecord(
            run_id=run_id, case_name=str(name), round=index, status=Status(self.status), reason=self.reason,
            case=CaseFacts(case=name.case, framework=name.framework, framework_version=name.framework_version,
                           hardware=name.hardware, vendor=vendor, nnodes=name.nnodes,
                           nprocs_per_node=name.nprocs_per_node, world_size=name.world_size, repeat=name.repeat,
                           extern_config=extern_config),
            started_at=self.started_at, ended_at=self.ended_at, wall_time_s=self.wall_time_s,
            metrics=self.metrics, warnings=self.warnings, results_path=where, source=f"import:{parser}",
            environment=Environment(imported_from=where, **self.details))


@dataclass(frozen=True)
class Parser:
    format: str
    version: int
    description: str
    parse: Callable[..., Imported]  # (path, world_size, skip_intervals) -> Imported
    # A format whose runs come as a folder (MLPerf's result_*.txt): files(folder) -> paths, and
    # score(folder, [(path, Imported)]) -> the line printed about the folder's score, added to each row.
    folder: Optional[Any] = None

    @property
    def name(self) -> str:
        return f"{self.format}/{self.version}"


class Span:
    """A log's earliest and latest time stamps (all that is kept of them), and the first stamp that went back
    by more than BACKWARDS_SLACK (``back``: the latest stamp before it, and it), if any did."""

    BACKWARDS_SLACK = timedelta(seconds=2)  # ranks' lines interleave in one file, each stamped by its own process

    def __init__(self) -> None:
        self.first: Optional[datetime] = None
        self.last: Optional[datetime] = None
        self.back: Optional[tuple[datetime, datetime]] = None

    def see(self, text: str) -> None:
        at = stamp(text)
        if at is None:
            return
        try:
            if self.back is None and self.last is not None and self.last - at > self.BACKWARDS_SLACK:
                self.back = (self.last, at)
            self.first = at if self.first is None else min(self.first, at)
            self.last = at if self.last is None else max(self.last, at)
        except TypeError:  # one stamp names its zone and another does not: no order between them
            self.back = self.back or (self.last, at)


def line_log_result(world_size: int, intervals: int, skipped: int, span: Span, error: str) -> Imported:
    """What every line-based log gives before its figures: when it ran (its first and last time stamps) and
    whether it ends in an error (then the import is ``failed``, whatever figures came before). Stamps that run
    backwards (a clock set back, several runs' logs in one) give no wall time, with a warning saying where."""
    result = Imported(status="ok", metrics={"world_size": world_size},
                      details={"intervals": intervals, "skipped": skipped})
    if span.back is not None:
        before, after = span.back
        result.warnings.append(f"time stamps run backwards ({after.isoformat()} after {before.isoformat()}): no "
                               "wall time is stored")
    elif span.first is not None:
        result.started_at, result.ended_at = span.first.isoformat(), span.last.isoformat()
        result.wall_time_s = (span.last - span.first).total_seconds()
    if error:
        result.status, result.reason = "failed", f"the log ends in an error: {error}"
    return result


# What a parser may raise on a log no test foresaw (a value of the wrong type, a number out of range, JSON
# nested past Python's stack): the log is then stored failed with the error named, never a traceback.
_UNFORESEEN = (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)


def parser(format: str, version: int, description: str,
           folder: Optional[Any] = None) -> Callable[[Callable[..., Imported]], Parser]:
    """A parser module's ``parse(path, world_size, skip_intervals)`` as the parser ``format/version``, its
    unforeseen errors turned into a failed import; the module names it, ``parsers.PARSERS`` registers it by path.
    ``folder``: see ``Parser.folder``."""
    def wrap(fn: Callable[..., Imported]) -> Parser:
        name = f"{format}/{version}"

        @functools.wraps(fn)
        def guarded(path: Path, world_size: int, skip_intervals: int = 1) -> Imported:
            try:
                result = fn(path, world_size, skip_intervals)
            except UserError:
                raise
            except _UNFORESEEN as exc:
                return Imported(status="failed", metrics={"world_size": world_size},
                                reason=f"the {name} parser could not read this log ({type(exc).__name__}: "
                                       f"{clip(str(exc))}); nothing from it was kept")
            for warning in result.warnings:  # stored with the attempt, and shown where the import runs
                print(f"warning: {warning}" if warning.startswith(str(path)) else f"warning: {path}: {warning}",
                      file=sys.stderr)
            return result

        return Parser(format, version, description, guarded, folder)
    return wrap


LINE_CAP_ENV = "ACCELBENCH_MAX_LOG_LINE_BYTES"
LINE_CAP_DEFAULT = 1 << 20  # a real log line is under a few kB; a MLLOG event with a large value tens of kB
_CHUNK = 1 << 18  # bytes read at a time: a line is never held whole before its length is known


def max_line_bytes() -> int:
    """The longest log line read (bytes, newline excluded): ``$ACCELBENCH_MAX_LOG_LINE_BYTES``, default 1 MiB."""
    raw = os.environ.get(LINE_CAP_ENV, "").strip()
    if not raw:
        return LINE_CAP_DEFAULT
    if not raw.isdigit() or int(raw) < 1:
        raise UserError(f"{LINE_CAP_ENV}={clip(raw)!r} is not a positive whole number",
                        f"unset it, or give a number of bytes (default {LINE_CAP_DEFAULT:,})")
    return int(raw)


def read_lines(path: Path, warnings: Optional[list[str]] = None) -> Iterator[str]:
    """A log's lines as text, read as a stream in bounded chunks, whatever the file holds.

    Bytes that are not UTF-8 read as U+FFFD; ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a line (as Python's text
    files read them). A line longer than ``max_line_bytes()`` is skipped without ever being held whole
    (memory stays at about the cap, however long the line or the file); at the end one warning counts the
    lines skipped and names the cap and the variable that raises it, in ``warnings`` (a parser's warnings
    are stored with the attempt and printed to stderr by ``register``'s wrapper).
    """
    cap = max_line_bytes()
    skipped = longest = 0
    line, dropping = bytearray(), -1  # dropping: the bytes so far of a line over the cap, -1 when none is
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                parts = chunk.split(b"\n")
                for i, part in enumerate(parts):
                    if dropping >= 0:
                        dropping += len(part)
                    elif len(line) + len(part) > cap:
                        dropping, line, skipped = len(line) + len(part), bytearray(), skipped + 1
                    else:
                        line += part
                    if i == len(parts) - 1:
                        break  # the line goes on in the next chunk
                    if dropping >= 0:
                        longest, dropping = max(longest, dropping), -1
                    else:
                        yield from _text(line, ended=True)
                        line = bytearray()
            if dropping >= 0:
                longest = max(longest, dropping)
            elif line:
                yield from _text(line, ended=False)
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    if skipped:
        note = (f"{path}: {skipped:,} line(s) longer than the cap of {cap:,} bytes skipped (the longest "
                f"{longest:,} bytes); to read such lines, raise the cap: {LINE_CAP_ENV}=<bytes>")
        if warnings is not None:
            warnings.append(note)


def _text(line: bytearray, ended: bool) -> Iterator[str]:
    text = line.decode("utf-8", errors="replace")
    if "\r" not in text:
        yield text + "\n" if ended else text
        return
    pieces = text.split("\r")
    if pieces[-1] == "" and ended:
        pieces.pop()  # \r\n: one line end
    for k, piece in enumerate(pieces):
        yield piece + "\n" if ended or k < len(pieces) - 1 else piece


class CappedWarnings(list):
    """A parser's warnings about single lines: the first ``keep`` are kept, the rest only counted (a log of a
    million bad lines must not make a million warnings). ``final()`` adds the count of those left out."""

    def __init__(self, keep: int = 20):
        super().__init__()
        self.keep, self.left_out = keep, 0

    def add(self, warning: str) -> None:
        if len(self) < self.keep:
            self.append(warning)
        else:
            self.left_out += 1

    def final(self) -> list[str]:
        return [*self, *([f"... and {self.left_out:,} more warning(s) like these"] if self.left_out else [])]


def clip(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters for a message (a log's value may be a megabyte)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def number(value) -> Optional[float]:
    """A JSON or parsed value as a float, or None when it is no number (bool, string, list, ...).
    Non-finite floats are returned as they are: the figure checks name them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int past a float's range
        return math.inf if value > 0 else -math.inf


def whole(value) -> Optional[int]:
    """A count (a batch size, an iteration): a finite whole number, else None."""
    value = number(value)
    return int(value) if value is not None and math.isfinite(value) and value == int(value) else None


def higher(peak: Optional[float], value: float) -> float:
    """The running peak of some readings (memory) with ``value`` read. A reading no memory can have (nan,
    infinite, negative) stays the peak, whatever comes after it (max() would skip it, or a nan), so the
    figure checks see and name it."""
    def impossible(x: float) -> bool:
        return not math.isfinite(x) or x < 0

    if peak is None or (impossible(value) and not impossible(peak)):
        return value
    return peak if impossible(peak) else max(peak, value)


def stamp(text: str) -> Optional[datetime]:
    """A log's time stamp (``YYYY-MM-DD HH:MM:SS``), or None when it names no real time (month 13, ...)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None

"""The line logs' shared reading: which lines a log's figures come from, and how much training each covers.

Every line-based format (Megatron-LM, Megatron-DeepSpeed, NeMo, torchtitan, the PaddleNLP/PaddleFormers Trainer,
ERNIEKit) prints one line per log interval: a mean, a rate or a count over the iterations since its previous
line. A parser turns each such line into a ``Reading`` (its step and its fields' meanings, through the format's
field table) and hands it here; what follows is the same for all of them:

- **A line covers one log interval**, never the gap back to the previous line shown: logs pasted into issues
  skip lines, and a line after a gap is still one interval's mean. The interval is the one the log states
  (Megatron's ``log_interval``, the Trainer's ``logging_steps``, NeMo's ``log_every_n_steps``), else the
  smallest gap between consecutive lines (a first line at step 1, the report torchtitan and Megatron-LM print
  of the first step, is left out of that smallest
  gap; where the tool prints an interval's time and its steps/s, their product counts each line's steps). A
  line never covers more than the gap back to the line before it.
- **Warm-up**: the first ``skip_intervals`` lines of a rank, and any later line whose interval reaches back
  into theirs (Megatron-LM's line after its first-iteration report still averages that first iteration).
- **Ranks**: lines may carry a rank prefix (torchrun's ``[rank3]:`` or ``[default3]:``, srun's ``3: ``).
  Each rank is kept apart; the figures come from the lowest rank with steady lines (lines after its warm-up).
  Unprefixed lines are one stream, and a line whose step is not past the previous one is another rank's
  repeat, left out and counted.

Memory stays bounded by the line count: per line a step and a few numbers in arrays, whatever the fields.
"""
from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass, field
from typing import Optional

from run_benchmarks.results.importers import clip, higher
from run_benchmarks.results.importers.fields import FieldTable

MAX_RANKS = 1024  # ranks kept apart; lines of further ranks are left out (a log of 10^6 ranks is no log)
MAX_STEP_DIGITS = 18  # a step count longer than this is no count
# the per-line numbers kept to combine the measured lines; everything else is folded as it comes
COLUMNS = ("step_time_s", "steps_per_s", "interval_s", "samples_per_s", "samples_per_s_per_device",
           "tokens_per_s", "tokens_per_s_per_device", "tflops_per_device", "mfu", "global_batch",
           "tokens_per_step", "skipped_iterations")
RATES = ("samples_per_s", "samples_per_s_per_device", "tokens_per_s", "tokens_per_s_per_device",
         "tflops_per_device", "mfu")  # per-second figures, combined by time
_RANK = re.compile(r"^\s*(?:\[(?:rank|default)(\d{1,6})\]:|(\d{1,6}): )")


def rank_prefix(line: str) -> tuple[Optional[int], str]:
    """(the rank a launcher's prefix names, or None; the line without the prefix)."""
    found = _RANK.match(line)
    if not found:
        return None, line
    return int(found.group(1) or found.group(2)), line[found.end():]


_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)")


def pipe_pairs(text: str) -> list[tuple[str, str]]:
    """``key: number`` of each ``|``-separated field (the number after a field's last colon): Megatron's and NeMo
    2's lines."""
    out = []
    for piece in text.split("|"):
        before, colon, value = piece.rpartition(":")
        key, value = before.rsplit(":", 1)[-1].strip(), value.strip()
        if colon and key and _NUMBER.fullmatch(value):
            out.append((key, value))
    return out


@dataclass
class Reading:
    """One training line: the step it reports and its fields by meaning (field tables' units)."""

    step: int
    values: dict
    rank: Optional[int] = None


class Errors:
    """Whether a log ends in an error: after a ``Traceback`` line, the line that names the exception."""

    def __init__(self) -> None:
        self.error = ""

    def see(self, line: str) -> None:
        text = line.strip()
        if text.startswith("Traceback (most recent call last)"):
            self.error = "a traceback"
        elif self.error == "a traceback" and text and not line.startswith((" ", "\t")) and ":" in text:
            self.error = clip(text, 300)


class Series:
    """One rank's lines: steps and the per-line columns, plus what is folded as it comes (loss, the flags)."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.columns = {key: array("d") for key in COLUMNS}
        self.present = {key: bytearray() for key in COLUMNS}  # 1 where the line printed the field
        self.repeats = 0
        self.loss_first = self.loss_last = None
        self.lr_zero = self.grad_nan = self.grad_seen = self.lr_seen = 0

    def add(self, reading: Reading, dedupe: bool) -> None:
        if dedupe and self.steps and reading.step <= self.steps[-1]:
            self.repeats += 1
            return
        self.steps.append(reading.step)
        values = reading.values
        for key, column in self.columns.items():
            column.append(values.get(key, 0.0))
            self.present[key].append(key in values)
        if "loss" in values:
            self.loss_first = values["loss"] if self.loss_first is None else self.loss_first
            self.loss_last = values["loss"]
        if "learning_rate" in values:
            self.lr_seen += 1
            self.lr_zero += values["learning_rate"] == 0
        if "grad_norm" in values:
            self.grad_seen += 1
            self.grad_nan += math.isnan(values["grad_norm"])

    def has(self, key: str, lines: list[int]) -> bool:
        """Whether every one of ``lines`` printed the field (a nan it printed counts: the checks name it)."""
        present = self.present[key]
        return bool(lines) and all(present[i] for i in lines)


@dataclass
class Coverage:
    """How many steps each line of a series covers, and which lines are steady (after the warm-up)."""

    interval: int
    interval_source: str
    covers: list[int]
    steady: list[int]
    warmup: int


@dataclass
class LineLog:
    """Every rank's training lines, the memory lines of any rank, the settings the log states."""

    table: FieldTable
    skip_intervals: int = 1
    series: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)  # meaning -> the largest reading of any rank
    memory_ranks: set = field(default_factory=set)
    extra_ranks: int = 0
    evaluations: int = 0
    untrained: list = field(default_factory=list)  # what the log itself says of a run that trained nothing
    shared: float = 0.0  # the largest memory reading printed with its share of the device

    def add(self, reading: Reading) -> None:
        rank = reading.rank
        if rank not in self.series and len(self.series) >= MAX_RANKS:
            self.extra_ranks += 1
            return
        self.series.setdefault(rank, Series()).add(reading, dedupe=rank is None)

    def setting(self, meaning: str, value: float) -> None:
        """A setting the log states once (its interval, sequence length, batch): the first statement holds."""
        if value is not None and math.isfinite(value) and meaning not in self.settings:
            self.settings[meaning] = value

    def peak(self, meaning: str, value: float, rank: Optional[int] = None) -> None:
        """A memory reading: the largest of every rank is kept (an impossible one stays, for the checks)."""
        self.memory[meaning] = higher(self.memory.get(meaning), value)
        if rank is not None:
            self.memory_ranks.add(rank)

    def share(self, used: float, share: float) -> None:
        """Memory in use printed with its share of the device: the device's size, from the largest reading (the
        most digits). torchtitan prints ``memory: 52.31GiB(65.39%)``."""
        if share > 0 and math.isfinite(used) and used > self.shared:
            self.shared, self.memory["device_bytes"] = used, used / share

    def chosen(self) -> tuple[Optional[int], Series, Optional[Coverage]]:
        """The lowest rank with steady lines (else the lowest rank with any line), its series and coverage."""
        order = sorted((r for r in self.series if r is not None)) + ([None] if None in self.series else [])
        covered = [(rank, self.series[rank], self.coverage(self.series[rank])) for rank in order]
        for rank, series, cover in covered:
            if cover and cover.steady:
                return rank, series, cover
        return covered[0] if covered else (None, Series(), None)

    def coverage(self, series: Series) -> Optional[Coverage]:
        steps = list(series.steps)
        if not steps:
            return None
        stated = self.settings.get("log_interval")
        if stated and stated >= 1 and stated == int(stated):
            interval, source = int(stated), f"stated by the log ({self.table.key_of('log_interval')})"
        else:
            interval, source = _smallest_gap(steps), "the smallest gap between consecutive lines"
        counted = _counted(series)  # the tool's own count of each line's steps, where it prints one
        covers = []
        for i, step in enumerate(steps):
            gap = step - steps[i - 1] if i else step
            if i == 1 and steps[0] == 1 and not self.table.first_report_resets:
                gap = step  # the line after Megatron-LM's first-iteration report still averages iteration 1
            covers.append(max(1, min(counted[i] if counted else interval, gap)))
        if counted and not stated:
            interval, source = max(counted), "the log's own count (interval time x steps/s)"
        warm = min(self.skip_intervals, len(steps))
        warm_end = steps[warm - 1] if warm else 0
        steady = [i for i in range(warm, len(steps)) if steps[i] - covers[i] >= warm_end]
        return Coverage(interval, source, covers, steady, warm)


def _smallest_gap(steps: list[int]) -> int:
    """The log interval from the steps alone: the smallest gap between consecutive lines, leaving out the gap
    from a first line at step 1 (torchtitan's and Megatron-LM's report of the first step) where others remain."""
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    if len(steps) > 2 and steps[0] == 1:
        gaps = gaps[1:]
    return max(1, min(gaps)) if gaps else max(1, steps[0])


def _counted(series: Series) -> list[int]:
    """Each line's steps as the tool counted them, where it prints an interval's time and its steps/s (the
    Trainer's ``interval_runtime`` x ``interval_steps_per_second``); empty where a line lacks either."""
    lines = list(range(len(series.steps)))
    if not (series.has("interval_s", lines) and series.has("steps_per_s", lines)):
        return []
    counts = [series.columns["interval_s"][i] * series.columns["steps_per_s"][i] for i in lines]
    if not all(math.isfinite(n) and n >= 0.5 for n in counts):
        return []
    return [max(1, round(n)) for n in counts]

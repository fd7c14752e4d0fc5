"""Field tables: what each field a line-log format prints counts, as data beside the format's parser.

A parser finds a line's ``key: value`` pairs; the format's table says, for each key it reads, what the number
means (one of ``MEANINGS``, each in one unit: seconds, bytes, samples, a fraction), the unit the tool prints
and the factor to that meaning's unit, whether it counts one device or the whole job (``per``), what stretch
of training it covers (``span``), and the file of the tool's own project that prints it (``source``:
``owner/repo path``). The tables are written from that printing code, not from logs, so a log nobody here has
seen is read by what its tool means; tests/test_import_field_tables.py checks every table and the README's
copy of it (``markdown``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

# meaning -> its unit; a field's ``scale`` turns the printed number into this unit
MEANINGS = {
    "step_time_s": "s per step", "steps_per_s": "steps/s", "interval_s": "s", "interval_steps": "steps",
    "samples_per_s": "samples/s", "samples_per_s_per_device": "samples/s",
    "tokens_per_s": "tokens/s", "tokens_per_s_per_device": "tokens/s", "tflops_per_device": "TFLOP/s (1e12)",
    "mfu": "fraction", "global_batch": "samples per step", "device_batch": "samples per step",
    "seq_len": "tokens per sample", "tokens_per_step": "tokens per step", "consumed_samples": "samples",
    "loss": "", "grad_norm": "", "learning_rate": "", "loss_scale": "",
    "skipped_iterations": "iterations", "nan_iterations": "iterations",
    "memory_allocated_peak": "bytes", "memory_reserved_peak": "bytes", "memory_allocated": "bytes",
    "memory_reserved": "bytes", "memory_share": "fraction of the device",
    "log_interval": "steps", "accumulation": "micro-batches per step",
}
PER = ("device", "job", "rank")  # rank: the printing process's own (a loss on one data-parallel rank)
SPANS = ("step", "interval", "run", "peak since start", "peak over the interval", "instant", "setting")
SETTINGS = ("log_interval", "seq_len", "global_batch", "device_batch", "accumulation")
_SOURCE = re.compile(r"^[\w.\-]+/[\w.\-]+ [\w./\-]+$")


@dataclass(frozen=True)
class Field:
    """One printed field: ``key`` as printed, what it means, its unit and factor, per what, over what, printed where."""

    key: str
    meaning: str
    unit: str
    scale: float
    per: str
    span: str
    source: str  # owner/repo path/of/the/file.py that prints it
    note: str = ""

    def value(self, text: str) -> Optional[float]:
        """The printed number in the meaning's unit; None for no number. A nan, inf or negative stays as it is:
        the figure checks name it."""
        digits = text.strip().replace(",", "").rstrip("%")
        try:
            number = float(digits)
        except ValueError:
            return None
        return number * self.scale if math.isfinite(number) else number


@dataclass(frozen=True)
class FieldTable:
    """A format's fields, checked when the table is built (a typo in a table is a failing import, not a guess)."""

    format: str
    title: str
    fields: tuple[Field, ...]
    # a line at step 1 restarts the tool's interval counters (torchtitan); Megatron-LM's first-iteration line
    # does not, so its next line still averages iteration 1
    first_report_resets: bool = True
    evaluation: str = "evaluation"  # what its evaluation lines are called (left out of the training lines)
    by_key: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = []
        for f in self.fields:
            if f.meaning not in MEANINGS:
                problems.append(f"{f.key}: meaning {f.meaning!r} is none of {', '.join(MEANINGS)}")
            if f.per not in PER or f.span not in SPANS:
                problems.append(f"{f.key}: per {f.per!r} / span {f.span!r} not in {PER} / {SPANS}")
            if not _SOURCE.match(f.source):
                problems.append(f"{f.key}: source {f.source!r} is not 'owner/repo path'")
            if (not f.unit and MEANINGS.get(f.meaning)) or not (f.scale > 0 and math.isfinite(f.scale)):
                problems.append(f"{f.key}: no unit (only a pure number may have none) or no positive scale")
        keys = [f.key for f in self.fields]
        problems += [f"{k}: listed twice" for k in sorted({k for k in keys if keys.count(k) > 1})]
        if problems:
            raise ValueError(f"field table {self.format}: " + "; ".join(problems))
        object.__setattr__(self, "by_key", {f.key: f for f in self.fields})

    def read(self, pairs: Iterable[tuple[str, str]]) -> dict[str, float]:
        """``{meaning: value}`` of the pairs whose key the table knows (the first of two keys of one meaning)."""
        out: dict[str, float] = {}
        for key, text in pairs:
            f = self.by_key.get(key)
            if f is not None and f.meaning not in out and (number := f.value(text)) is not None:
                out[f.meaning] = number
        return out

    def key_of(self, meaning: str, seen: Iterable[str] = ()) -> str:
        """The printed key of ``meaning`` (of those ``seen``, if any was): how a source or warning names a field."""
        seen = set(seen)
        keys = [f.key for f in self.fields if f.meaning == meaning]
        return next((k for k in keys if k in seen), keys[0] if keys else meaning)

    def markdown(self) -> str:
        """The table as the README prints it."""
        rows = [f"| `{f.key}` | {f.meaning} | {f.unit or '-'} "
                f"| {f.per} | {f.span} | `{f.source}`{(' — ' + f.note) if f.note else ''} |" for f in self.fields]
        return "\n".join(["| field | meaning | printed unit | per | covers | printed by |",
                          "| --- | --- | --- | --- | --- | --- |", *rows])

"""A line log's figures checked against each other: a field that contradicts the rest never becomes the headline.

A tool prints several figures of one interval, and most of them are arithmetic on a few facts (the batch, the
step time, the sequence length, the device's memory). Where the log states enough of them, each figure must agree
with the others (within ``TOLERANCE``, past the rounding tools print with):

  samples/s x step time      the global batch the log states; else a whole multiple of one device's batch
                             (per-device batch x accumulation) where the log states that; else at least one sample
  tokens/s (job)             samples/s x the sequence length the log states (tokens/s/device x devices, where the
                             layout is known)
  memory and its share       the device's size: against the declared hardware's memory (``device_memory``)

The step time, the batch and the sequence length are what the tool ran with; the rates are its arithmetic on
them, where tools have been wrong (the 2022 PaddleNLP Trainer divides one step's samples on one device by the
whole interval's time). So a rate that disagrees is the one named: a warning says which field, what it implies
and what the rest say, ``metrics["contradictions"]`` keeps it by its printed key, and the headline comes from
the rest (samples/s from the batch and step time) or is left out.

What no check can see: with ``logging_steps`` 1, the 2022 Trainer's figure is one device's samples/s, a whole
batch per step, and only the layout (how many devices share the data) tells it from the job's; with no batch
stated at all, only a samples/s under one sample per step is caught.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from run_benchmarks.results.importers.lines import RATES

TOLERANCE = 0.05


@dataclass
class Checked:
    values: dict = field(default_factory=dict)  # meaning -> (value, its source; "" = the log's field, as is)
    contradictions: dict = field(default_factory=dict)  # printed key -> why it is left out
    warnings: list = field(default_factory=list)
    seq_len: Optional[float] = None
    batch_checked: bool = False

    def contradict(self, table, meaning: str, why: str) -> None:
        key = table.key_of(meaning)
        note = table.by_key[key].note if key in table.by_key else ""
        self.values.pop(meaning, None)
        self.contradictions[key] = why
        self.warnings.append(f"the log's {key} contradicts its other figures and is left out: {why}"
                             + (f" ({note})" if note else ""))


def _off(a: float, b: float) -> bool:
    return not (math.isfinite(a) and math.isfinite(b) and b) or abs(a / b - 1) > TOLERANCE


def _usable(x) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def check(means: dict, log, world_size: Optional[int]) -> Checked:
    """The figures to publish, by meaning, after the checks; and the contradictions found."""
    out, table, settings = Checked(), log.table, log.settings
    out.values = {key: (means[key], "") for key in RATES if key in means}
    batch = means.get("global_batch") or settings.get("global_batch")
    _batch(out, table, means, settings, batch)
    seq = settings.get("seq_len")
    if not _usable(seq) and _usable(means.get("tokens_per_step")) and _usable(batch):
        seq = means["tokens_per_step"] / batch
    out.seq_len = seq if _usable(seq) else None
    _tokens(out, table, out.seq_len, world_size)
    _fill(out, table, means, out.seq_len, batch)
    return out


def _batch(out: Checked, table, means: dict, settings: dict, batch) -> None:
    step, rate = means.get("mean_step_s"), out.values.get("samples_per_s")
    if rate is None or not _usable(step):
        return
    implied = rate[0] * step
    key = table.key_of("samples_per_s")
    if _usable(batch):
        if _off(implied, batch):
            out.contradict(table, "samples_per_s", f"{key} x the step time is {implied:,.4g} samples per step, but "
                                                   f"the global batch is {batch:,.6g}")
        else:
            out.batch_checked = True
        return
    per = settings.get("device_batch")
    if _usable(per):
        per *= settings.get("accumulation") or 1
        times = implied / per
        if times < 1 - TOLERANCE or abs(times - round(times)) > TOLERANCE * max(1.0, times):
            out.contradict(table, "samples_per_s", f"{key} x the step time is {implied:,.4g} samples per step, not "
                                                   f"a whole multiple of one device's batch, {per:,.6g}")
        else:
            out.batch_checked = True
    elif implied < 1 - TOLERANCE:
        out.contradict(table, "samples_per_s", f"{key} x the step time is {implied:,.4g} samples per step: less "
                                               "than one sample")


def _tokens(out: Checked, table, seq, world_size: Optional[int]) -> None:
    samples = out.values.get("samples_per_s")
    if samples is None or not _usable(seq):
        return
    expected = samples[0] * seq
    for meaning, devices in (("tokens_per_s", 1), ("tokens_per_s_per_device", world_size)):
        found = out.values.get(meaning)
        if found is None or not devices or not math.isfinite(found[0]):
            continue
        if _off(found[0] * devices, expected):
            what = (f"{table.key_of(meaning)}{f' x {devices} devices' if devices > 1 else ''} is "
                    f"{found[0] * devices:,.6g} tokens/s, but {table.key_of('samples_per_s')} x the sequence "
                    f"length {seq:,.6g} is {expected:,.6g}")
            if out.batch_checked:  # samples/s agrees with the batch: the tokens field is the odd one
                out.contradict(table, meaning, what)
            else:
                out.warnings.append(f"the log's figures disagree: {what}; neither is checked against a batch, both "
                                    "are kept")


def _fill(out: Checked, table, means: dict, seq, batch) -> None:
    """Samples/s from the batch and step time where the log prints none (or one that contradicts); tokens/s from
    the log's tokens per step, else from samples/s and the log's sequence length."""
    if "samples_per_s" not in out.values and "samples_per_s_from_batch" in means:
        out.values["samples_per_s"] = (means["samples_per_s_from_batch"], (
            f"derived from the log: sum({table.key_of('global_batch')} x steps) / sum(step time x steps) over the "
            "steady lines"))
    elif "samples_per_s" not in out.values and _usable(batch) and _usable(means.get("mean_step_s")):
        out.values["samples_per_s"] = (batch / means["mean_step_s"], (
            f"derived from the log: its {table.key_of('global_batch')} {batch:,.6g} (a setting) / the steady lines' "
            "mean step time"))
    if "tokens_per_s" in out.values or "tokens_per_s_per_device" in out.values:
        return
    if "tokens_per_s_from_steps" in means:
        out.values["tokens_per_s"] = (means["tokens_per_s_from_steps"], (
            f"derived from the log: sum({table.key_of('tokens_per_step')} x steps) / sum(step time x steps)"))
    elif "samples_per_s" in out.values and _usable(seq):
        samples, _ = out.values["samples_per_s"]
        out.values["tokens_per_s"] = (samples * seq, f"derived: samples/s x the log's sequence length {seq:,.6g} "
                                                     f"({table.key_of('seq_len')})")


def device_memory(imported, declared: Optional[int]) -> None:
    """The device size a logged memory share implies, against the declared hardware's memory: a contradiction is
    named and the declared size kept; with no hardware declared, the log's size is the memory total."""
    m = imported.metrics
    logged = m.get("memory_device_bytes_logged")
    if not _usable(logged):
        return
    if declared and _off(logged, declared):
        m.setdefault("contradictions", {})["memory share"] = (
            f"the memory and its share of the device imply {logged / 2**30:,.1f} GiB, the declared hardware "
            f"{declared / 2**30:,.1f} GiB")
        imported.warnings.append(f"the log's memory share contradicts the declared hardware: it implies a device "
                                 f"of {logged / 2**30:,.1f} GiB, the hardware named has {declared / 2**30:,.1f} GiB "
                                 "(the declared size is kept; name the hardware that ran, --hardware)")
    elif not declared:
        m["memory_total_bytes"], m["memory_total_source"] = int(logged), "log"
        imported.source("memory_total_bytes", "derived: the log's memory reading / its share of the device")

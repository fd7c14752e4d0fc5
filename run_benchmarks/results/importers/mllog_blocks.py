"""MLPerf's training blocks read for what their keys say: how much each block trained, in which unit, in how long.

MLPerf's logging rules put training between evaluations into blocks (``block_start``/``block_stop``, or
``epoch_start``/``epoch_stop`` where a log has no blocks), and a block says how far training got in one of
two ways: ``samples_count`` (samples from the run's start) on its events, or ``first_epoch_num`` and
``epoch_count``. What those numbers count is the benchmark's: epochs in ResNet's sense, samples, or tokens
(NeMo's and Habana's GPT-3 put the block's size in tokens into ``epoch_count`` and the tokens trained into
``train_samples``). So no key is taken at its name; each reading below is used only where the log's other
keys agree with it, and a log where none does has no throughput, with the reason (the attempt fails):

- ``samples_count`` on a block's start and stop: the difference. Where the stop repeats the start's count
  (NeMo 405B: the count is updated after the block's last step), the block ends at the next count the log
  states (the evaluation that follows it), never with a warning.
- ``epoch_count``, checked against the total the log states at the end of the run (``train_samples`` or
  ``trained_samples`` logged after ``run_start``): the blocks' epoch_count adds up to it (each block's size is
  its epoch_count); or each block spans evaluations and evaluations x epoch_count adds up to it (epoch_count
  is the evaluation interval: Habana's one block of 25); or the log's one block is one epoch (BERT: the
  samples trained are the total). Without such a total: epoch_count x the ``train_samples`` logged before the
  run (the samples of one epoch), provided no evaluation sits past the blocks' last epoch.
- The unit, from ``global_batch_size`` (G, samples a step) and ``max_sequence_length`` (S): a block must be
  whole steps of G samples. Where it is also whole steps of G x S tokens the count could be either; it is
  tokens where, read as samples, the run would take more steps than the learning-rate schedule the log
  states (``opt_learning_rate_decay_steps`` / ``opt_learning_rate_training_steps``), and refused where no
  schedule tells.

A block's time is its duration less the evaluations timed inside it (``eval_start``/``eval_stop``): the rules
time training between evaluations, and a block that spans them would count their time as training.
Memory: a few numbers per block, whatever the log's length. Over 300 lines: each reading, the cross-checks
that decide it and ``tracked_stats`` (per block, beside the blocks) are read together, and apart they would
each need the others' state.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import asdict, dataclass, field
from typing import Optional

from run_benchmarks.results.analyze import Stats
from run_benchmarks.results.importers import CappedWarnings, Imported, higher, number

GIB = 1 << 30
COLUMNS = ("seconds", "eval_s", "evals", "start", "end", "stated", "counted")


def _position(metadata: dict, keys: tuple[str, ...]) -> Optional[float]:
    for key in keys:
        value = number(metadata.get(key))
        if value is not None and math.isfinite(value) and value >= 0:
            return value
    return None


class Timeline:
    """The complete blocks (or epochs) of a log in its order, a few numbers each (``COLUMNS``; nan: not
    stated): training seconds, evaluations inside (seconds, count), the position at its start and end, its
    epoch_count, and whether it counts by samples_count (1) or by epoch_count (0)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.cols = {name: array("d") for name in COLUMNS}
        self.open: Optional[dict] = None
        self.awaiting = -1  # the block whose end is the next samples_count the log states (-1: none)
        self.eval_open: Optional[float] = None
        self.last_eval_position: Optional[float] = None
        self.awaited = 0  # blocks whose end came from the event after them

    def __len__(self) -> int:
        return len(self.cols["seconds"])

    def event(self, key: str, time_ms: float, metadata: dict, warnings: CappedWarnings, where: str) -> None:
        counted = _position(metadata, ("samples_count",))
        if key == f"{self.kind}_start":
            self._settle(counted)
            first = _position(metadata, ("first_epoch_num", "epoch_num"))
            stated = number(metadata.get("epoch_count", 1 if self.kind == "epoch" else None))
            self.open = {"start_ms": time_ms, "counted": counted is not None, "eval_s": 0.0, "evals": 0,
                         "start": counted if counted is not None else first,
                         "stated": stated if stated is not None and math.isfinite(stated) and stated > 0 else None}
        elif key == f"{self.kind}_stop" and self.open is not None:
            self._close(time_ms, metadata, counted, warnings, where)
        elif key in ("eval_start", "eval_stop", "eval_accuracy"):
            at = _position(metadata, ("samples_count", "epoch_num"))
            if at is not None:
                self.last_eval_position = max(at, self.last_eval_position or 0.0)
            if self.open is not None:
                if key == "eval_start":
                    self.eval_open = time_ms
                elif key == "eval_stop" and self.eval_open is not None:
                    self.open["eval_s"] += (time_ms - self.eval_open) / 1000
                    self.open["evals"] += 1
                    self.eval_open = None
                elif key == "eval_accuracy" and self.eval_open is None:
                    self.open["evals"] += 1  # an evaluation logged without eval_start/eval_stop: counted, not timed
            else:
                self._settle(at)
        elif key == "run_stop":
            self._settle(counted)

    def _close(self, time_ms: float, metadata: dict, counted: Optional[float], warnings: CappedWarnings,
               where: str) -> None:
        block, self.open, self.eval_open = self.open, None, None
        stated = block["stated"] or number(metadata.get("epoch_count"))
        stated = stated if stated is not None and math.isfinite(stated) and stated > 0 else None
        if not block["counted"] and not stated:
            warnings.add(f"{self.kind} at {where}: no samples_count on both ends nor epoch_count; left out of the "
                         "throughput")
            return
        seconds = (time_ms - block["start_ms"]) / 1000
        if seconds <= 0:
            warnings.add(f"{where}: {self.kind}_stop is not after its {self.kind}_start; left out")
            return
        end = math.nan
        stop_position = counted if block["counted"] else _position(metadata, ("epoch_num",))
        if stop_position is not None and block["start"] is not None and stop_position > block["start"]:
            end = stop_position
        values = {"seconds": seconds - block["eval_s"], "eval_s": block["eval_s"],
                  "evals": block["evals"], "start": math.nan if block["start"] is None else block["start"],
                  "end": end, "stated": stated or math.nan, "counted": 1.0 if block["counted"] else 0.0}
        for name in COLUMNS:
            self.cols[name].append(values[name])
        if block["counted"] and math.isnan(end):
            self.awaiting = len(self) - 1

    def _settle(self, position: Optional[float]) -> None:
        """The awaited block's end: the first samples_count stated after it."""
        if self.awaiting >= 0 and position is not None and position > self.cols["start"][self.awaiting]:
            self.cols["end"][self.awaiting] = position
            self.awaited += 1
        if position is not None:
            self.awaiting = -1


@dataclass
class Reading:
    """What the blocks trained: per block its amount (in ``unit``) and training seconds, how it was read."""

    unit: str = ""  # samples | tokens; '' where nothing could be read
    amounts: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    how: str = ""
    notes: list[str] = field(default_factory=list)
    refused: str = ""


@dataclass(frozen=True)
class Keys:
    """The log's keys the readings are checked against (None: not stated)."""

    batch: Optional[int] = None  # global_batch_size
    seq: Optional[int] = None  # max_sequence_length
    total: Optional[float] = None  # train_samples / trained_samples logged after run_start
    per_epoch: Optional[float] = None  # train_samples logged before run_start
    schedule: Optional[float] = None  # opt_learning_rate_decay_steps / opt_learning_rate_training_steps


def read(timeline: Timeline, keys: Keys) -> Reading:
    """The blocks' amounts and unit, or a refusal naming what does not add up."""
    reading = Reading()
    if not len(timeline):
        return reading
    cols = timeline.cols
    counted = [i for i in range(len(timeline)) if cols["counted"][i]]
    if counted and len(counted) < len(timeline):
        reading.refused = (f"the {timeline.kind}s mix samples_count ({len(counted)}) and epoch_count "
                           f"({len(timeline) - len(counted)}): no one reading of what they count")
        return reading
    if counted:
        amounts, reading.how = _by_samples_count(timeline, reading)
    else:
        amounts, reading.how, reading.refused = _by_epoch_count(timeline, keys)
    if reading.refused:
        return reading
    keep = [i for i, a in enumerate(amounts) if a is not None]
    reading.amounts = [amounts[i] for i in keep]
    reading.seconds = [cols["seconds"][i] for i in keep]
    left = [(i, cols["seconds"][i]) for i in keep if cols["seconds"][i] <= 0]
    if left:
        reading.refused = (f"{timeline.kind} {left[0][0] + 1}'s evaluations take all its time "
                           f"({cols['eval_s'][left[0][0]]:,.3f} s): no training time left")
        return reading
    if reading.how.startswith("epoch_count x train_samples"):  # epochs of a dataset: no whole steps to check
        reading.unit, note = "samples", ""
    else:
        reading.unit, note, reading.refused = _unit(reading.amounts, keys)
    if note:
        reading.notes.append(note)
    timed = [i for i in keep if cols["eval_s"][i] > 0]
    untimed = [i for i in keep if cols["evals"][i] > 0 and cols["eval_s"][i] == 0]
    if timed:
        reading.notes.append(f"{len(timed)} {timeline.kind}(s) span evaluations: their "
                             f"{sum(int(cols['evals'][i]) for i in timed):,} evaluations' "
                             f"{math.fsum(cols['eval_s'][i] for i in timed):,.1f} s left out of the training time")
    if untimed:
        reading.notes.append(f"{len(untimed)} {timeline.kind}(s) hold evaluations the log does not time (no "
                             "eval_start/eval_stop): their time counts as training time")
    return reading


def _by_samples_count(timeline: Timeline, reading: Reading) -> tuple[list[Optional[float]], str]:
    cols, out, missing = timeline.cols, [], 0
    for start, end in zip(cols["start"], cols["end"]):
        out.append(None if math.isnan(end) or end <= start else end - start)
        missing += out[-1] is None
    if missing:
        reading.notes.append(f"{missing} {timeline.kind}(s) left out of the throughput: no samples_count after "
                             "their start")
    how = "samples_count at each block's start and end"
    if timeline.awaited:
        how += (f" ({timeline.awaited} block_stop(s) repeat the start's samples_count: such a block ends at the "
                "samples_count of the evaluation after it)")
    return out, how


def _by_epoch_count(timeline: Timeline, keys: Keys) -> tuple[list[Optional[float]], str, str]:
    cols, n, kind = timeline.cols, len(timeline), timeline.kind
    stated, starts, ends = list(cols["stated"]), list(cols["start"]), list(cols["end"])
    total = keys.total
    if all(not math.isnan(e) and not math.isnan(s) for s, e in zip(starts, ends)):
        amounts = [e - s for s, e in zip(starts, ends)]
        if total is None or math.fsum(amounts) == total or max(ends) == total:
            return amounts, f"the position at each {kind}'s start and end", ""
        return [], "", (f"the {kind}s' positions add up to {math.fsum(amounts):,.0f}, but the log's total at the "
                        f"end of the run is {total:,.0f}")
    if any(math.isnan(s) for s in stated):
        return [], "", f"a {kind} states neither samples_count nor epoch_count"
    if total is not None:
        summed = math.fsum(stated)
        if summed == total:
            return stated, f"epoch_count of each {kind}, adding up to the log's total {total:,.0f}", ""
        spans = [max(1.0, e) * s for e, s in zip(cols["evals"], stated)]
        if math.fsum(spans) == total:
            evals = int(math.fsum(cols["evals"]))
            return spans, (f"each {kind} spans its evaluations ({evals:,} in all) and its epoch_count is the "
                           f"evaluation interval: evaluations x epoch_count, adding up to the log's total "
                           f"{total:,.0f}"), ""
        if n == 1 and stated[0] == 1:
            return [total], f"the log's one {kind} is one epoch: the log's total {total:,.0f}", ""
        return [], "", (f"the {kind}s' sizes do not add up: epoch_count sums to {summed:,.0f} over {n} {kind}(s) "
                        f"(evaluations x epoch_count: {math.fsum(spans):,.0f}), but train_samples at the end of "
                        f"the run says {total:,.0f}")
    if keys.per_epoch is not None:
        last_epoch = max(s + c for s, c in zip(starts, stated) if not math.isnan(s)) if any(
            not math.isnan(s) for s in starts) else math.fsum(stated)
        if timeline.last_eval_position is not None and timeline.last_eval_position > last_epoch + 1:
            return [], "", (f"epoch_count read as epochs of train_samples {keys.per_epoch:,.0f} would end at "
                            f"epoch {last_epoch:,.0f}, but an evaluation is at {timeline.last_eval_position:,.0f}: "
                            "the blocks count something other than epochs")
        return [s * keys.per_epoch for s in stated], \
            f"epoch_count x train_samples {keys.per_epoch:,.0f} (the samples of one epoch)", ""
    return [], "", f"the {kind}s count epoch_count, but the log states no train_samples to size an epoch"


def _unit(amounts: list[float], keys: Keys) -> tuple[str, str, str]:
    """(unit, note, refusal) of the amounts: samples or tokens, by global_batch_size and max_sequence_length."""
    batch, seq = keys.batch, keys.seq
    if not batch:
        return "samples", "what the blocks count is not cross-checked: the log states no global_batch_size", ""
    if seq and all(a % (batch * seq) == 0 for a in amounts):
        steps = math.fsum(amounts) / batch
        if keys.schedule and steps > keys.schedule:
            return "tokens", (f"the blocks count tokens: each is whole steps of {batch:,} x {seq:,} tokens, and "
                              f"read as samples they would make {steps:,.0f} steps, past the log's learning-rate "
                              f"schedule of {keys.schedule:,.0f} steps"), ""
        return "", "", (f"each block is whole steps both of {batch:,} samples and of {batch:,} x {seq:,} tokens, and "
                        "no learning-rate schedule in the log (opt_learning_rate_decay_steps or _training_steps) "
                        "tells which it counts")
    odd = [a for a in amounts if a % batch]
    if odd:
        return "samples", (f"{len(odd)} block(s) are not whole steps of global_batch_size {batch:,} (the first: "
                           f"{odd[0]:,.0f} samples)"), ""
    return "samples", "", ""


class Tracked:
    """``tracked_stats`` folded: throughput per value in the log's order, per-step step times with the block
    they fell in, the first and last loss, the largest memory reading."""

    def __init__(self) -> None:
        self.throughput, self.step_times, self.step_blocks = array("d"), array("d"), array("d")
        self.loss_first = self.loss_last = self.memory = None

    def add(self, value: dict, block: int) -> None:
        rate, step = number(value.get("throughput")), number(value.get("train_step_time"))
        if rate is not None:
            self.throughput.append(rate)
        elif step is not None:  # a step's own time (a block's mean comes with its throughput)
            self.step_times.append(step)
            self.step_blocks.append(block)
        loss = number(value.get("reduced_train_loss"))
        if loss is not None:
            self.loss_first = loss if self.loss_first is None else self.loss_first
            self.loss_last = loss
        memory = number(value.get("max_memory_usage"))
        if memory is not None:
            self.memory = higher(self.memory, memory)

    def figures(self, result: Imported, skip: int, blocks: int) -> None:
        """Step time over the measured blocks' steps, loss, peak memory, each with its source."""
        m = result.metrics
        first = skip if blocks > skip else 0  # the block index each step fell in: the measured blocks' steps
        steps = [t for t, b in zip(self.step_times, self.step_blocks) if b >= first]
        if steps:
            m["step_time_s"] = asdict(Stats.of(steps))
            result.source("step_time_s", f"log: tracked_stats train_step_time, {len(steps)} step(s) in the measured "
                                         "blocks")
        if self.loss_first is not None:
            m["loss_first"], m["loss_last"] = self.loss_first, self.loss_last
            result.source("loss_last", "log: tracked_stats reduced_train_loss, the last")
        if self.memory is not None:
            m["peak_memory_bytes"], m["memory_kind"] = {"max": self.memory * GIB}, "max_memory_usage"
            result.source("peak_memory_bytes", "log: tracked_stats max_memory_usage, the largest (read as GiB: the "
                                               "log names no unit)")

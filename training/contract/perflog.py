"""Perf records: the only thing the orchestrator reads from a worker.

A record is one line on a worker's stdout: ``ACCELBENCH_PERF <json>``. The JSON
carries ``v`` (this schema's version) and ``kind``. Standard library only, so the
orchestrator can read it without torch or paddle installed.

Kinds (version 5; version 4 lacked breakdown's ``phase``, ``compute_parts``, ``group_sizes``, ``pipeline_wait_s``
and ``pipeline``, which an older reader would drop unseen, version 3 also ``breakdown``,
version 2 also ``figure``, version 1 also ``unsupported`` and the reserved-memory peak):
  start        once per rank, before the first step: layout, model size, FLOPs/token, tokens and samples
               per step, and (local rank 0 only) the node's environment
  step         once per optimizer step: wall time after device synchronisation (and, optional in version 3,
               the wall clock at its end)
  end          once per rank, after the last step: peak memory (allocator and reserved)
  unsupported  instead of steps, when the device cannot run what the case asks (the round is
               ``unsupported``, not ``failed``)
  figure       a named figure a task measures beyond tokens per step (an RLHF phase's throughput, a GEMM's
               TFLOP/s at one size, a collective's bus bandwidth): value, unit, which way is better and how
               the ranks' values combine. A task made only of figures (micro-benchmarks) emits no steps
  breakdown    once per rank, after the measured steps: where a step's time goes, timed phase by phase on
               dedicated steps (training/breakdown.py says how), or why it was not measured; a PPO rank sends
               one per phase of its learning update (``phase``: experience, learning), whose sum is the update
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import IO, Any, Optional, Union

PREFIX = "ACCELBENCH_PERF "
SCHEMA_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)


class PerfLogError(ValueError):
    """A line carries the prefix but is not a record this version understands."""


@dataclass(frozen=True)
class StartRecord:
    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    framework: str
    framework_version: str
    device: str
    precision: str
    n_params: int
    flops_per_token: float
    flop_formula: str
    tokens_per_step: int = field(metadata={"doc": "tokens this rank consumes per optimizer step"})
    environment: Optional[dict] = None
    trainable_params: Optional[int] = field(default=None, metadata={"doc": "parameters the optimizer updates "
                                                                           "(fewer than n_params under LoRA)"})
    data: Optional[dict] = field(default=None, metadata={"doc": "what the tokens are (source, file, size)"})
    init_time_s: Optional[float] = field(default=None, metadata={
        "doc": "seconds from the process's start to this record: imports, groups, model, data"})
    samples_per_step: Optional[float] = field(default=None, metadata={
        "doc": "sequences this rank's share of an optimizer step processes (summed over ranks: the global "
               "batch); a PPO step's are the sequences it makes and learns from"})
    kind: str = "start"


@dataclass(frozen=True)
class StepRecord:
    rank: int
    step: int
    warmup: bool
    step_time_s: float
    tokens: int
    loss: float
    effective_tokens: Optional[int] = field(default=None, metadata={
        "doc": "of ``tokens``, those that are not padding (instruction data, padded per batch)"})
    grad_norm: Optional[float] = field(default=None, metadata={
        "doc": "global L2 norm of the step's gradients (after loss-scale removal), read after the clock stops"})
    flops: Optional[float] = field(default=None, metadata={
        "doc": "model FLOPs of this rank's share of the step, where batches vary in width (instruction data)"})
    ended_at: Optional[float] = field(default=None, metadata={
        "doc": "wall clock (Unix seconds) when the step ended, after device synchronisation: where the measured "
               "steps fall among the monitor's samples (the same host's clock)"})
    kind: str = "step"


@dataclass(frozen=True)
class EndRecord:
    rank: int
    steps: int
    peak_memory_bytes: int = field(metadata={"doc": "the allocator's peak of memory handed to tensors, or the "
                                                    "process's peak RSS on a CPU"})
    memory_total_bytes: Optional[int]
    memory_kind: str = field(metadata={"doc": "rss (process peak RSS) or allocated (the framework allocator's "
                                              "peak on the device)"})
    peak_memory_reserved_bytes: Optional[int] = field(default=None, metadata={
        "doc": "the allocator's peak of device memory held (cached blocks included): the device memory in use "
               "as the driver sees it, which published actual/total tables show"})
    recompiles: Optional[int] = field(default=None, metadata={
        "doc": "graphs torch.compile built after the warm-up steps, i.e. inside measured steps (0 is what a "
               "trustworthy timing needs); None when not compiling"})
    kind: str = "end"


@dataclass(frozen=True)
class UnsupportedRecord:
    rank: int
    reason: str = field(metadata={"doc": "what the device cannot run, e.g. fp8 on a CPU"})
    kind: str = "unsupported"


FIGURE_BETTER = ("higher", "lower")
FIGURE_REDUCE = ("mean", "sum", "min", "max")


@dataclass(frozen=True)
class FigureRecord:
    rank: int
    name: str = field(metadata={"doc": "dotted, e.g. experience.samples_per_s or allreduce.busbw_gbps"})
    value: float
    unit: str = field(metadata={"doc": "what the value counts, e.g. samples/s, TFLOP/s, GB/s, s"})
    better: str = field(default="higher", metadata={"doc": "higher | lower"})
    reduce: str = field(default="mean", metadata={
        "doc": "how the ranks' values make the round's: mean | sum | min | max"})
    params: Optional[dict] = field(default=None, metadata={
        "doc": "what this value is of, when a figure is measured at several points (size, dtype, bytes)"})
    formula: Optional[str] = field(default=None, metadata={"doc": "how the value was computed, for the report"})
    kind: str = "figure"

    def __post_init__(self) -> None:
        if self.better not in FIGURE_BETTER:
            raise ValueError(f"figure {self.name!r}: better must be one of {FIGURE_BETTER}, not {self.better!r}")
        if self.reduce not in FIGURE_REDUCE:
            raise ValueError(f"figure {self.name!r}: reduce must be one of {FIGURE_REDUCE}, not {self.reduce!r}")


# Where a record's breakdown steps ran, as its ``method`` names it (training/breakdown.py ``method``; the
# orchestrator's words say which): the last warm-up steps, or extra steps after the measured ones.
BREAKDOWN_IN_WARMUP, BREAKDOWN_AFTER = "that are the last warm-up steps", "after the measured ones"


@dataclass(frozen=True)
class BreakdownRecord:
    rank: int
    steps: int = field(metadata={"doc": "dedicated breakdown steps, outside the measured ones: the last warm-up "
                                        "steps or after the measured ones, as ``method`` says (0: not measured)"})
    data_s: list = field(default_factory=list, metadata={"doc": "per breakdown step: fetching its micro-batches"})
    compute_s: list = field(default_factory=list, metadata={
        "doc": "per breakdown step: forward and backward of every micro-batch, no gradient collective in it"})
    wait_s: list = field(default_factory=list, metadata={
        "doc": "per breakdown step: a barrier before the collectives, i.e. waiting for the slowest rank's compute"})
    communication_s: list = field(default_factory=list, metadata={
        "doc": "per breakdown step: the gradient collectives, issued one after another and waited for"})
    optimizer_s: list = field(default_factory=list, metadata={"doc": "per breakdown step: the optimizer step"})
    step_s: list = field(default_factory=list, metadata={
        "doc": "per breakdown step: first phase's start to last phase's end (the phases plus what lies between)"})
    bucket_bytes: list = field(default_factory=list, metadata={
        "doc": "bytes of each collective of one step (DDP: one all-reduce per bucket), nccl-tests' message size"})
    collective_ops: list = field(default_factory=list, metadata={
        "doc": "the nccl-tests operation of each collective in bucket_bytes (allreduce, allgather, reducescatter, "
               "broadcast, reduce); empty: all all-reduces"})
    group_size: int = field(default=1, metadata={"doc": "ranks each gradient collective spans"})
    group_sizes: list = field(default_factory=list, metadata={
        "doc": "ranks each collective in bucket_bytes spans (tensor parallel's group beside data parallel's); "
               "empty: all group_size"})
    method: str = field(default="", metadata={"doc": "how the phases were separated and timed"})
    not_measured: Optional[str] = field(default=None, metadata={
        "doc": "why there is no breakdown, e.g. not measured for tensor parallel"})
    phase: Optional[str] = field(default=None, metadata={
        "doc": "None: the whole optimizer step (pretraining, finetune, LoRA; every record before version 5); a PPO "
               "learning update's phase, one record each: experience (making) or learning. A rank's phases "
               "together are its whole update"})
    compute_parts: dict = field(default_factory=dict, metadata={
        "doc": "per breakdown step, named parts of compute_s (PPO experience: generation and scoring; learning: "
               "actor and critic), each with its own collectives taken out"})
    pipeline_wait_s: list = field(default_factory=list, metadata={
        "doc": "pipeline parallel, per breakdown step: the schedule's time outside this rank's own chunk compute "
               "(P2P sends and receives issued and waited for: the transfers and the bubble, waiting for a "
               "neighbour stage, together) and the barrier across the pipeline after it; empty without a pipeline"})
    pipeline: Optional[dict] = field(default=None, metadata={
        "doc": "pipeline parallel: schedule, ranks (pipeline degree), stages, stages_per_rank, micro_batches, "
               "stage_ids (this rank's), sends and send_bytes (this rank's P2P sends in one step)"})
    kind: str = "breakdown"

    PER_STEP = ("data_s", "compute_s", "wait_s", "communication_s", "optimizer_s", "step_s")
    PHASES = (None, "experience", "learning")

    def __post_init__(self) -> None:
        """Refuse a record the round's medians could not be taken of (``from_payload``: a PerfLogError)."""
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps must be a non-negative integer, not {self.steps!r}")
        if self.pipeline is not None and not isinstance(self.pipeline, dict):
            raise ValueError(f"pipeline must be an object (the schedule's facts), not {self.pipeline!r:.80}")
        per_step = self.PER_STEP + (("pipeline_wait_s",) if self.pipeline is not None else ())
        for name in per_step if self.steps else ():
            values = getattr(self, name)
            if not _finite_list(values, self.steps):
                raise ValueError(f"{name} must hold {self.steps} finite numbers (one per breakdown step), "
                                 f"not {values!r:.80}")
        if self.phase not in self.PHASES:
            raise ValueError(f"phase must be one of {self.PHASES}, not {self.phase!r:.40}")
        if not isinstance(self.compute_parts, dict):
            raise ValueError(f"compute_parts must be an object of named lists, not {self.compute_parts!r:.80}")
        for name, values in self.compute_parts.items():
            if not isinstance(name, str) or not _finite_list(values, self.steps):
                raise ValueError(f"compute_parts[{name!r:.40}] must hold {self.steps} finite numbers (one per "
                                 f"breakdown step), not {values!r:.80}")
        if self.group_sizes and (not isinstance(self.group_sizes, list) or len(self.group_sizes) != len(
                self.bucket_bytes) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                              for n in self.group_sizes)):
            raise ValueError(f"group_sizes must hold one positive integer per collective in bucket_bytes "
                             f"({len(self.bucket_bytes)}), not {self.group_sizes!r:.80}")


def _finite_list(values, n: int) -> bool:
    return isinstance(values, list) and len(values) == n and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


Record = Union[StartRecord, StepRecord, EndRecord, UnsupportedRecord, FigureRecord, BreakdownRecord]
_KINDS = {cls.__dataclass_fields__["kind"].default: cls
          for cls in (StartRecord, StepRecord, EndRecord, UnsupportedRecord, FigureRecord, BreakdownRecord)}


def share_of(tokens: int | float, ranks: int) -> int | float:
    """A rank's share of tokens that ``ranks`` ranks process together (tensor/pipeline parallel): an int
    where it divides evenly, so the sum over ranks counts the global batch once."""
    per_rank = tokens / ranks
    return int(per_rank) if per_rank.is_integer() else per_rank


def format_record(record: Record) -> str:
    payload = {"v": SCHEMA_VERSION, **asdict(record)}
    return PREFIX + json.dumps(payload, separators=(",", ":"), allow_nan=False)


def emit(record: Record, stream: IO[str] = None) -> None:
    stream = stream or sys.stdout
    stream.write(format_record(record) + "\n")
    stream.flush()


def parse_line(line: str) -> Optional[Record]:
    """The record on this line, or None for ordinary log output."""
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        payload: dict[str, Any] = json.loads(line[start + len(PREFIX):])
    except json.JSONDecodeError as exc:
        raise PerfLogError(f"perf record is not valid JSON: {exc}") from None
    return from_payload(payload)


def from_payload(payload: dict[str, Any]) -> Record:
    """The record a decoded JSON object stands for (readers that decode many lines at once use this)."""
    if not isinstance(payload, dict):
        raise PerfLogError(f"perf record is a JSON {type(payload).__name__}, not an object")
    payload = dict(payload)
    version = payload.pop("v", None)
    if version not in READABLE_VERSIONS:
        raise PerfLogError(f"perf record version {version!r}; this accelbench reads versions "
                           f"{', '.join(map(str, READABLE_VERSIONS))}")
    cls = _KINDS.get(payload.get("kind"))
    if cls is None:
        raise PerfLogError(f"unknown perf record kind {payload.get('kind')!r}")
    known = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in payload.items() if k in known})
    except (TypeError, ValueError) as exc:
        raise PerfLogError(f"{payload.get('kind')} record: {exc}") from None

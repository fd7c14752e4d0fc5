"""The MLPerf benchmark table (``mlperf_benchmarks.yaml``) as typed data: what each benchmark's log keys count.

A parser written file by file cannot know that GPT-3's ``epoch_num`` counts tokens, R-GAT's a fraction of an
epoch and RetinaNet's ``train_samples`` batches; MLPerf's rules and reference implementations do. The table
holds that knowledge as data, each reading with its source, and this module refuses a table that leaves a
reading uncited or contradicts itself, so a wrong row fails at load (and in the tests), never in a figure.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

TABLE = Path(__file__).with_name("mlperf_benchmarks.yaml")
Unit = Literal["samples", "tokens", "epochs"]
EVENTS = ("block_start", "block_stop", "epoch_start", "epoch_stop", "eval_start", "eval_stop", "eval_accuracy",
          "run_stop")


class Metric(BaseModel):
    """A quality metric the rules score: told apart by ``metadata.metric`` or by a key of a dict value."""

    model_config = ConfigDict(extra="forbid")
    name: str
    metric: Optional[str] = None  # the eval_accuracy event's metadata.metric naming it (FID, CLIP)
    field: Optional[str] = None  # the key of a dict value holding it ({BBOX, SEGM}, {epoch, value})
    goal: Optional[str] = None  # the rules' target, as written there (">= 0.72")


class Benchmark(BaseModel):
    model_config = ConfigDict(extra="forbid")
    names: list[str] = Field(min_length=1)
    amount: Literal["positions", "block_size", "whole_epochs", "none"]
    why: Optional[str] = None  # amount none: why no reading holds
    unit: Unit
    positions: dict[str, str] = Field(default_factory=dict)  # event key -> metadata key, in `unit`
    block_size: Optional[str] = None
    train_samples: Literal["total", "per_epoch", "iterations_per_epoch", "unused"]
    dataset_samples: Optional[int] = Field(None, gt=0)
    tokens: Optional[Literal["max_sequence_length", "case"]] = None
    sequence_length: Optional[int] = Field(None, gt=0)
    metrics: list[Metric] = Field(min_length=1)
    sources: dict[str, str]

    @model_validator(mode="after")
    def _consistent(self) -> "Benchmark":
        needed = {"train_samples", "tokens", "metrics", "amount" if self.amount != "positions" else "positions"}
        uncited = sorted(k for k in needed if not self.sources.get(k, "").strip())
        if uncited:
            raise ValueError(f"no source for {', '.join(uncited)}: every reading cites the rules or the reference")
        unknown = sorted(set(self.positions) - set(EVENTS))
        if unknown:
            raise ValueError(f"positions on {', '.join(unknown)}: no MLLOG event states a position (use "
                             f"{', '.join(EVENTS)})")
        if self.amount == "positions" and not self.positions:
            raise ValueError("amount positions needs the events that state them (positions)")
        if self.amount == "block_size" and not self.block_size:
            raise ValueError("amount block_size needs block_size: the block_start key holding its size")
        if self.amount == "none" and not self.why:
            raise ValueError("amount none needs why: the reason a log's throughput is refused")
        if self.unit == "epochs" and self.amount != "none" and self.train_samples not in ("per_epoch",
                                                                                          "iterations_per_epoch"):
            raise ValueError("a reading in epochs needs train_samples per_epoch or iterations_per_epoch to size one")
        if self.tokens == "max_sequence_length" and not self.sequence_length:
            raise ValueError("tokens max_sequence_length needs sequence_length: the rules' fixed length")
        named = [m.metric for m in self.metrics]
        if len(self.metrics) > 1 and None in named and None in [m.field for m in self.metrics]:
            raise ValueError("several metrics must each say how a log tells them apart (metric or field)")
        return self


class Table(BaseModel):
    model_config = ConfigDict(extra="forbid")
    common: dict[str, str]
    benchmarks: dict[str, Benchmark]

    @model_validator(mode="after")
    def _names_unique(self) -> "Table":
        seen: dict[str, str] = {}
        for key, row in self.benchmarks.items():
            for name in row.names:
                if name in seen:
                    raise ValueError(f"benchmark name {name!r} is in both {seen[name]} and {key}")
                seen[name] = key
        return self

    def find(self, name: Optional[str]) -> Optional[tuple[str, Benchmark]]:
        """The row whose names hold ``submission_benchmark``, or None (a benchmark the table does not know)."""
        for key, row in self.benchmarks.items():
            if name in row.names:
                return key, row
        return None


def parse(text: str, where: str = str(TABLE)) -> Table:
    """A table from its YAML text; a broken one raises ValueError naming the file and the row."""
    try:
        return Table.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ValueError(f"{where}: {exc}") from None


@functools.lru_cache(maxsize=1)
def table() -> Table:
    return parse(TABLE.read_text(encoding="utf-8"))

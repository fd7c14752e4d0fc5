"""A sweep's grid: named axes over case-name fields, extern configs and workload keys, crossed into points.

An axis value is a bundle of settings: ``nprocs_per_node: 2``, ``extern_config: config_X``, ``layout: 1x8``
(nodes x processes) or any workload key (``train.micro_batch_size: 4``, applied as ``--set``). The grid is
the product of the axes over every base case name, minus the exclusions; ``where`` rules add settings to
the points they match (e.g. a memory limit on one point); ``table`` names a reference table printed after
the sweep's own (``mfu``, ``finetune``...: accelbench table NAME of the sweep's run). Points are plain data (saved in the run's
``sweep.json``), so ``accelbench sweep --resume RUN`` rebuilds the same grid without the command line.
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Literal, Optional, Sequence, Union

from pydantic import Field, field_validator, model_validator

from run_benchmarks.catalog import casename
from run_benchmarks import limits
from run_benchmarks.catalog.config import Strict, load_model, parse_yaml
from run_benchmarks.catalog.config_files import CaseEntry
from run_benchmarks.errors import UserError
from run_benchmarks.results.tables import NAMES as TABLE_NAMES

CASE_FIELDS = ("case", "framework", "hardware", "nnodes", "nprocs_per_node")
POINT_KEYS = (*CASE_FIELDS, "extern_config", "layout")  # everything else is a workload key (--set)
Scalar = Union[str, int, float, bool]


class AxisSpec(Strict):
    """``key`` with a list of ``values``, or ``values`` as named bundles ``{label: {key: value, ...}}``."""

    key: Optional[str] = None
    values: Union[list[Scalar], dict[str, dict[str, Any]]] = Field(min_length=1)

    @model_validator(mode="after")
    def _key_for_lists(self) -> "AxisSpec":
        if isinstance(self.values, list) and not self.key:
            raise ValueError("a list of values needs 'key' (e.g. key: train.micro_batch_size); or give "
                             "values as named bundles {label: {key: value}}")
        if isinstance(self.values, dict) and self.key:
            raise ValueError("named bundles carry their own keys: remove 'key', or give values as a list")
        return self

    def bundles(self) -> list[tuple[str, dict[str, Any]]]:
        if isinstance(self.values, list):
            return [(_label(v), {self.key: v}) for v in self.values]
        return list(self.values.items())


class WhereRule(Strict):
    match: dict[str, Scalar] = Field(min_length=1, description="axis name -> label")
    set: dict[str, Any] = Field(min_length=1, description="settings added to the matching points")


class ScalingSpec(Strict):
    axis: str = Field(description="the axis whose values change the device count (e.g. processes)")
    mode: str = Field("strong", pattern="^(strong|weak)$",
                      description="strong: same global batch, more devices; weak: same batch per device")


class SweepFile(Strict):
    """``configs/sweeps/*.yaml``: the grid of one sweep."""

    cases: list[Union[str, CaseEntry]] = Field(default_factory=list, description=(
        "base case names (or test_conf-style {case, extern_config, set}); axes replace their fields"))
    set: dict[str, Any] = Field(default_factory=dict, description="settings for every point")
    axes: dict[str, AxisSpec] = Field(default_factory=dict)
    exclude: list[dict[str, Scalar]] = Field(default_factory=list, description="points to leave out "
                                                                                "(axis name -> label)")
    where: list[WhereRule] = Field(default_factory=list)
    scaling: Optional[ScalingSpec] = None
    table: Optional[Literal[TABLE_NAMES]] = Field(None, description=(
        "a published table printed after the sweep's own, from its stored rounds (accelbench table NAME RUN)"))

    @field_validator("cases")
    @classmethod
    def _parse(cls, cases: list[Union[str, CaseEntry]]) -> list[Union[str, CaseEntry]]:
        return [str(casename.parse(c)) if isinstance(c, str) else c.model_copy(update={
            "case": str(casename.parse(c.case))}) for c in cases]


class Point(Strict):
    """One grid point: the case name, extern config and ``--set`` texts a plan is built from."""

    index: int
    labels: dict[str, str]
    case_name: str
    extern_config: Optional[str] = None
    sets: list[str] = Field(default_factory=list)

    def with_sets(self, *extra: str) -> "Point":
        return self.model_copy(update={"sets": [*self.sets, *extra]})


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def assignment(key: str, value: Any) -> str:
    """``key=value`` as ``--set`` reads it back (the value as JSON, which is YAML)."""
    return f"{key}={json.dumps(value)}"


def grid_axis(text: str) -> tuple[str, AxisSpec]:
    """``--grid train.micro_batch_size=1,2,4`` -> axis ``micro_batch_size`` (the key's last part)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not sep or not key or not items:
        raise UserError(f"--grid {text!r}: expected KEY=VALUE,VALUE,...", "e.g. --grid train.micro_batch_size=1,2,4")
    values = [parse_yaml(item, f"--grid {text!r}") for item in items]
    if any(isinstance(v, (dict, list)) or v is None for v in values):
        raise UserError(f"--grid {text!r}: each value must be a number, a word or true/false",
                        "for bundles of settings use a sweep file (--file), 'axes:' with named values")
    return key.split(".")[-1], AxisSpec(key=key, values=values)


def load_sweep_file(path: Path) -> SweepFile:
    if not path.is_file():
        raise UserError(f"--file {path}: file not found", "write a sweep file; configs/sweeps/ has examples")
    return load_model(SweepFile, path)


def merge_command_line(sweep: SweepFile, case_names: Sequence[Union[str, CaseEntry]], grids: list[str],
                       sets: list[str]) -> SweepFile:
    """The command line's case names, ``--grid`` axes and ``--set`` on top of a sweep file (or none)."""
    axes = dict(sweep.axes)
    for text in grids:
        name, axis = grid_axis(text)
        if name in axes:
            raise UserError(f"--grid {text!r}: axis {name!r} is given twice", "give each key one --grid")
        axes[name] = axis
    extra = {}
    for text in sets:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--set {text!r}: expected KEY=VALUE", "e.g. --set train.steps=10")
        extra[key.strip()] = parse_yaml(raw, f"--set {text!r}") if raw.strip() else ""
    cases = SweepFile.model_validate({"cases": list(case_names)}).cases or sweep.cases
    return sweep.model_copy(update={"cases": cases, "axes": axes, "set": {**sweep.set, **extra}})


def expand(sweep: SweepFile) -> list[Point]:
    """Every point of the grid, in order: base case names outermost, then the axes as written."""
    if not sweep.cases:
        raise UserError("a sweep needs at least one case name", "give CASE_NAME arguments, or 'cases:' in the "
                                                                "sweep file, e.g. gpt2_tiny:torch:cpu:1:1")
    names = list(sweep.axes)
    _check_rules(sweep, names)
    # Counted before anything is built: a grid of a few long axes is millions of points.
    limits.SWEEP_POINTS.check(math.prod([len(sweep.cases), *(len(sweep.axes[n].bundles()) for n in names)]),
                              "sweep (before exclusions)")
    points: list[Point] = []
    for entry in sweep.cases:
        base, own = _entry(entry)
        for combo in itertools.product(*(sweep.axes[n].bundles() for n in names)):
            labels = {n: label for n, (label, _) in zip(names, combo)}
            if any(_matches(rule, labels) for rule in sweep.exclude):
                continue
            settings: dict[str, Any] = {**sweep.set, **own}
            for _, bundle in combo:
                settings.update(bundle)
            for rule in sweep.where:
                if _matches(rule.match, labels):
                    settings.update(rule.set)
            if len(sweep.cases) > 1:
                labels = {"case_name": base + (f" {own['extern_config']}" if "extern_config" in own else ""),
                          **labels}
            points.append(_point(len(points), labels, base, settings))
    return points


def _entry(entry: Union[str, CaseEntry]) -> tuple[str, dict[str, Any]]:
    """A base case and what its own entry sets (a test_conf entry's extern config and keys)."""
    if isinstance(entry, str):
        return entry, {}
    own = dict(entry.set)
    if entry.extern_config:
        own["extern_config"] = entry.extern_config
    return entry.case, own


def _matches(match: dict[str, Scalar], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == _label(v) for k, v in match.items())


def _check_rules(sweep: SweepFile, names: list[str]) -> None:
    for rule in [*sweep.exclude, *(w.match for w in sweep.where)]:
        unknown = [k for k in rule if k not in names]
        if unknown:
            raise UserError(f"sweep rule {rule} names no axis {unknown[0]!r}", f"axes: {', '.join(names) or 'none'}")


def _point(index: int, labels: dict[str, str], base: str, settings: dict[str, Any]) -> Point:
    name = casename.parse(base)
    fields: dict[str, Any] = {"case": name.case, "framework": name.framework_field, "hardware": name.hardware,
                              "nnodes": name.nnodes, "nprocs_per_node": name.nprocs_per_node}
    extern, sets = None, []
    for key, value in settings.items():
        if key in CASE_FIELDS:
            fields[key] = value
        elif key == "layout":
            nodes, sep, procs = str(value).partition("x")
            if not sep:
                raise UserError(f"sweep layout {value!r}: expected NODESxPROCESSES", "e.g. layout: 1x8")
            fields["nnodes"], fields["nprocs_per_node"] = nodes, procs
        elif key == "extern_config":
            extern = None if value in (None, "", "none") else str(value)
        else:
            sets.append(assignment(key, value))
    text = ":".join(str(fields[f]) for f in CASE_FIELDS)
    if name.repeat != 1:
        text += f":{name.repeat}"
    return Point(index=index, labels=labels, case_name=str(casename.parse(text)), extern_config=extern, sets=sets)

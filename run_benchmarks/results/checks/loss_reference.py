"""Loss-curve references: the file format, what makes a run comparable with one, and recording one from runs.

A reference is the mean and spread of the loss at every step over N >= 3 runs that differ only in their data
seed (same init, ``train.seed``), with where and how it was measured. It lives beside the case,
``cases/<case>/loss_reference.yaml``, not beside a vendor: the curve belongs to the model, data and batch,
and its whole use is to check runs on other platforms, frameworks and layouts against it. One file holds one
curve per shape of the case (tokens per step, steps).

Comparable (else refused, naming what differs): the same model, task, data (source, generator, file) and
tokens per optimizer step over the same number of steps. Everything else (framework, hardware, layout,
precision, learning rate, data seed...) may differ: it is listed beside the verdict (``checks/loss_check.py``).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, NonNegativeFloat, PositiveFloat, ValidationError, conint, model_validator

from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.config import Strict, load_model
from run_benchmarks.pathnames import component
from run_benchmarks.results.figures.analyze import LOSS_SERIES_POINTS
from run_benchmarks.results.report.facts import case_name_of, migrated
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.rounds.workload import layout_facts

FILE_NAME = "loss_reference.yaml"
SCHEMA = "accelbench.loss_reference/1"
MIN_RUNS = 3
# Case facts that are settings of a run, compared and listed like the workload's own settings
CASE_SETTINGS = ("framework", "framework_version", "hardware", "nnodes", "nprocs_per_node")
SEED_SETTING = "data.seed"  # what differs between a reference's runs; never listed as a difference
# Settings that cannot change the loss at any step: what is timed (warm-up steps still train), the time
# breakdown's dedicated steps after the measured ones, and the debug delays and exit that only cost time.
# A run differing from its reference only in these is the same training: they are never listed.
NO_LOSS_EFFECT = ("train.warmup_steps", "train.breakdown_steps", "debug.collective_delay_ms",
                  "debug.data_fetch_delay_ms", "debug.compute_delay_ms", "debug.exit_code_after_end")


class Band(Strict):
    """How a run is judged (checks/loss_check.py): from ``first_step`` on, step ``s`` is inside when
    ``|loss_s - mean_s| <= k * max(std_s, floor * mean_s)``; the run passes when at most ``max_outside`` of
    the steps are outside, the mean relative error ``|loss_s - mean_s| / mean_s`` is at most
    ``mean_rel_error`` (FlagPerf's 2 %), and its loss fell by at least ``min_drop`` of the reference's drop."""

    first_step: conint(ge=0, le=10_000_000)
    k: PositiveFloat = Field(3.0, le=1000)
    floor: NonNegativeFloat = Field(0.005, allow_inf_nan=False, le=1, description="relative: a zero-noise "
                                                                                  "reference is no bit-equality test")
    max_outside: float = Field(0.1, ge=0, le=1, description="share of checked steps allowed outside the band")
    mean_rel_error: PositiveFloat = Field(0.02, le=1000)
    min_drop: float = Field(0.5, ge=0, le=1, description="share of the reference's loss drop a run must show")

    def half_width(self, mean: float, std: float) -> float:
        """Half-width of the band at one step: k * max(std, floor * |mean|)."""
        return self.k * max(std, self.floor * abs(mean))


class Recorded(Strict):
    """Where and how the reference was measured."""

    case_name: str
    settings: dict[str, Any] = Field(description="the runs' workload as dotted settings (data.seed left out)")
    data_seeds: list[int] = Field(max_length=1000)
    train_seed: int
    run_ids: list[str] = Field(max_length=1000)
    recorded_at: str


class Curve(Strict):
    comparable: dict[str, Any] = Field(description="model, task, data, tokens per step and steps: what a run "
                                                   "must share to be checked against this curve")
    recorded: Recorded
    band: Band
    steps: list[int] = Field(max_length=LOSS_SERIES_POINTS, description="as the rounds' metrics.loss_series")
    mean: list[float] = Field(max_length=LOSS_SERIES_POINTS)
    std: list[float] = Field(max_length=LOSS_SERIES_POINTS, description="sample standard deviation over the "
                                                                        "runs (n - 1)")

    @model_validator(mode="after")
    def _aligned(self) -> "Curve":
        if not (len(self.steps) == len(self.mean) == len(self.std)) or not self.steps:
            raise ValueError("steps, mean and std must be lists of one equal, non-zero length")
        for step, mean, std in zip(self.steps, self.mean, self.std):
            # A band of infinite or absurd width passes any curve: the spread of N runs' loss is finite and
            # smaller than the loss itself (or than 1 nat, for a loss near zero).
            if not (math.isfinite(mean) and math.isfinite(std)):
                raise ValueError(f"step {step}: mean {mean!r} and std {std!r} must be finite numbers")
            if not 0 <= std <= max(abs(mean), 1.0):
                raise ValueError(f"step {step}: std {std:g} is outside 0 to max(|mean|, 1) = "
                                 f"{max(abs(mean), 1.0):g}: a band that wide passes any curve")
        return self

    def describe(self) -> str:
        r = self.recorded
        return (f"{r.case_name} ({len(r.run_ids)} runs, data seeds {', '.join(map(str, r.data_seeds))}, "
                f"{self.comparable['tokens_per_step']} tokens/step, {self.comparable['steps']} steps)")


class LossReferenceFile(Strict):
    schema_: Literal["accelbench.loss_reference/1"] = Field(SCHEMA, alias="schema")
    curves: list[Curve] = Field([], max_length=1000)


def reference_path(cases_dir: Path, case: str, row: str = "a stored row") -> Path:
    """The case's reference file. ``case`` comes from a stored row, and rows arrive in bundles from elsewhere:
    a name that is not one plain path component ("../../x") is refused before it becomes a path."""
    component(case, f"{row}: its case", "the row was not written by accelbench (an imported bundle?): leave "
              "that run out of the command; a case name is one folder name under cases/")
    return cases_dir / case / FILE_NAME


def load(cases_dir: Path, case: str, row: str = "a stored row") -> Optional[LossReferenceFile]:
    path = reference_path(cases_dir, case, row)
    return load_model(LossReferenceFile, path) if path.is_file() else None


def dump_yaml(ref: LossReferenceFile) -> str:
    import yaml

    data = ref.model_dump(mode="json", by_alias=True)
    return yaml.safe_dump(data, sort_keys=False, width=120)


def flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


class RunCurve:
    """A stored ok round as a reference sees it: its loss per step, comparable facts and settings."""

    def __init__(self, attempt: Attempt):
        self.run_id, self.round = attempt.get("run_id"), attempt.get("round")
        self.label = f"run {self.run_id} round {self.round}"
        stored = attempt.get("workload")
        series = (attempt.get("metrics") or {}).get("loss_series")
        self.problem = ""
        if not series:
            self.problem = f"{self.label} stored no loss per step (a round from before loss_series, or an import)"
        if not isinstance(stored, dict):
            self.problem = self.problem or f"{self.label} stored no workload"
            return
        try:
            spec = WorkloadSpec.model_validate(migrated(stored))
        except ValidationError as exc:
            self.problem = self.problem or f"{self.label}: its workload does not read today: {exc.errors()[0]['msg']}"
            return
        name = case_name_of(attempt)
        self.case_name = str(attempt.get("case_name") or name)
        self.points = {int(s): float(v) for s, v in series or []}
        self.data_seed = spec.train.seed if spec.data.seed is None else spec.data.seed
        self.train_seed = spec.train.seed
        data = spec.data.model_dump(mode="json", exclude={"seed"})
        if data["source"] != "synthetic":
            data.pop("synthetic")
        self.comparable = {"model": spec.model.model_dump(mode="json"), "task": spec.task, "data": data,
                           "tokens_per_step": layout_facts(name, spec)["global_batch_tokens"],
                           "steps": spec.train.steps}
        self.settings = {k: v for k, v in flat(spec.model_dump(mode="json")).items()
                         if k != SEED_SETTING and not k.startswith(("model.", "data."))}
        self.settings.update({k: attempt.get(k) for k in CASE_SETTINGS})


def differences(a: dict, b: dict) -> list[str]:
    """``key: a-value vs b-value`` for every dotted key whose values differ."""
    fa, fb = flat(a), flat(b)
    return [f"{k}: {fa.get(k, '(unset)')!r} vs {fb.get(k, '(unset)')!r}" for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def default_first_step(steps: int) -> int:
    """FlagPerf checks from step 21 on; a shorter run from its second half."""
    return min(21, steps // 2)


def record(curves: list[RunCurve], band: Optional[Band] = None) -> Curve:
    """The reference of ``curves`` (N >= 3 rounds of one workload, distinct data seeds). ValueError: why not."""
    broken = [c.problem for c in curves if c.problem]
    if broken:
        raise ValueError("; ".join(broken))
    if len(curves) < MIN_RUNS:
        raise ValueError(f"{len(curves)} ok round(s) with a loss series; a reference needs at least {MIN_RUNS}")
    first = curves[0]
    for other in curves[1:]:
        diff = differences(first.comparable, other.comparable) + differences(first.settings, other.settings)
        if diff:
            raise ValueError(f"{first.label} and {other.label} differ in more than their data seed: "
                             + "; ".join(diff))
    seeds = [c.data_seed for c in curves]
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"data seeds {seeds} repeat: rounds of one seed differ only by nondeterminism, not by "
                         "the seed noise a band needs; run each with its own --set data.seed=N")
    steps = sorted(set.intersection(*(set(c.points) for c in curves)))
    if not steps:
        raise ValueError("the rounds share no step")
    mean = [math.fsum(c.points[s] for c in curves) / len(curves) for s in steps]
    std = [math.sqrt(math.fsum((c.points[s] - m) ** 2 for c in curves) / (len(curves) - 1))
           for s, m in zip(steps, mean)]
    band = band or Band(first_step=default_first_step(first.comparable["steps"]))
    checked = [i for i, s in enumerate(steps) if s >= band.first_step]
    if not checked:
        raise ValueError(f"no step at or after first_step {band.first_step} (the runs have {steps[-1] + 1})")
    drop = mean[0] - mean[checked[-1]]
    widest = max(band.half_width(mean[i], std[i]) for i in checked)
    if drop <= widest:
        raise ValueError(f"the mean loss fell by {drop:.4g} from step {steps[0]} to {steps[checked[-1]]}, no more "
                         f"than the band's half-width {widest:.4g}: a curve that does not move checks nothing "
                         "(data.synthetic markov gives a loss that falls)")
    recorded = Recorded(case_name=first.case_name, settings=first.settings, data_seeds=seeds,
                        train_seed=first.train_seed, run_ids=[c.run_id for c in curves],
                        recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return Curve(comparable=first.comparable, recorded=recorded, band=band, steps=steps, mean=mean, std=std)


def merged(existing: Optional[LossReferenceFile], curve: Curve) -> LossReferenceFile:
    """The file with ``curve`` in place of any curve of the same comparable facts."""
    kept = [c for c in (existing.curves if existing else []) if c.comparable != curve.comparable]
    return LossReferenceFile(curves=kept + [curve])

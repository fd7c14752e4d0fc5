"""Does a run train the same model? Its loss per step against a loss-curve reference (checks/loss_reference.py).

From the band's ``first_step`` on, step ``s`` is inside when ``|loss_s - mean_s| <= k * max(std_s, floor *
mean_s)``: the width comes from the seed spread the reference measured, with a relative floor so a reference
of zero spread does not ask for bit equality. A run passes when (1) at most ``max_outside`` of its checked
steps are outside, (2) its mean relative error ``mean_s |loss_s - mean_s| / mean_s`` is at most
``mean_rel_error`` (FlagPerf's criterion, 2 %), and (3) its loss fell by at least ``min_drop`` of the
reference's fall over the same steps: a loss that does not move fails even where a relative error is small.
The verdict names the first steps outside and lists the settings in which the run differs from the reference
(layout, precision, framework, learning rate...): what the curve says did, or did not, change the training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

from run_benchmarks.results.checks.loss_reference import (
    NO_LOSS_EFFECT, Band, Curve, LossReferenceFile, RunCurve, differences, load, reference_path)

SHOWN_STEPS = 5  # steps outside named in a verdict; the rest counted


@dataclass(frozen=True)
class StepCheck:
    step: int
    loss: float
    mean: float
    half: float

    @property
    def inside(self) -> bool:
        return math.isfinite(self.loss) and abs(self.loss - self.mean) <= self.half

    @property
    def rel_error(self) -> float:
        return abs(self.loss - self.mean) / abs(self.mean) if math.isfinite(self.loss) else math.inf


@dataclass(frozen=True)
class LossVerdict:
    label: str
    reference: str  # the file and the curve it was checked against
    refused: str = ""  # not comparable: what differs
    band: Optional[Band] = None
    steps: tuple[StepCheck, ...] = ()
    differing: tuple[str, ...] = ()
    run_drop: float = math.nan
    reference_drop: float = math.nan

    @property
    def outside(self) -> list[StepCheck]:
        return [s for s in self.steps if not s.inside]

    @property
    def mean_rel_error(self) -> float:
        return math.fsum(s.rel_error for s in self.steps) / len(self.steps) if self.steps else math.nan

    @property
    def moved(self) -> bool:
        """A flat reference moves nothing: every flat run would pass a relative-error test against it."""
        return self.reference_drop > 0 and self.run_drop >= self.band.min_drop * self.reference_drop

    @property
    def passed(self) -> bool:
        if self.refused or not self.steps:
            return False
        return (len(self.outside) <= self.band.max_outside * len(self.steps)
                and self.mean_rel_error <= self.band.mean_rel_error and self.moved)

    def reasons(self) -> list[str]:
        """Each criterion with its numbers, failed ones first."""
        b, out = self.band, self.outside
        named = ", ".join(f"{s.step} ({s.loss:.4g} vs {s.mean:.4g} ± {s.half:.3g})" for s in out[:SHOWN_STEPS])
        more = f" and {len(out) - SHOWN_STEPS} more" if len(out) > SHOWN_STEPS else ""
        band_ok = len(out) <= b.max_outside * len(self.steps)
        lines = [
            (band_ok, f"{len(out)} of {len(self.steps)} steps from step {b.first_step} outside mean ± {b.k:g}·max(std, "
                      f"{b.floor:.1%}·mean) (at most {b.max_outside:.0%} allowed)"
                      + (f"; first outside: {named}{more}" if out else "")),
            (self.mean_rel_error <= b.mean_rel_error,
             f"mean relative error {self.mean_rel_error:.2%} (at most {b.mean_rel_error:.0%})"),
            (self.moved, f"loss fell {self.run_drop:.4g} from the first step to the last, the reference "
                         f"{self.reference_drop:.4g} (at least {b.min_drop:.0%} of it needed"
                         + ("; a reference that does not fall checks nothing)" if self.reference_drop <= 0 else ")")),
        ]
        return [("ok: " if ok else "FAIL: ") + text for ok, text in sorted(lines, key=lambda x: x[0])]

    @property
    def verdict(self) -> str:
        if self.refused:
            return f"not comparable: {self.refused}"
        return "pass" if self.passed else "FAIL (the loss curve left the reference band: not the same training)"


def check_curve(run: RunCurve, curve: Curve, where: str) -> LossVerdict:
    """``run`` (comparable with ``curve``) against it."""
    band = curve.band
    missing = [s for s in curve.steps if s not in run.points]
    if missing:
        return LossVerdict(run.label, where, refused=f"the run has no loss at step(s) {missing[:SHOWN_STEPS]}")
    checks = tuple(StepCheck(s, run.points[s], m, band.half_width(m, sd))
                   for s, m, sd in zip(curve.steps, curve.mean, curve.std) if s >= band.first_step)
    first, last = curve.steps[0], checks[-1].step if checks else curve.steps[-1]
    ref_at = dict(zip(curve.steps, curve.mean))
    differing = tuple(d for d in differences(curve.recorded.settings, run.settings)
                      if d.split(":", 1)[0] not in NO_LOSS_EFFECT)
    return LossVerdict(run.label, where, band=band, steps=checks, differing=differing,
                       run_drop=run.points[first] - run.points[last], reference_drop=ref_at[first] - ref_at[last])


def check_run(run: RunCurve, ref: LossReferenceFile, where: str) -> LossVerdict:
    """Against the file's curve of the same comparable facts; refused, with what differs, where none is."""
    if run.problem:
        return LossVerdict(run.label, where, refused=run.problem)
    for curve in ref.curves:
        if curve.comparable == run.comparable:
            return check_curve(run, curve, f"{where} ({curve.describe()})")
    if not ref.curves:
        return LossVerdict(run.label, where, refused="the file holds no curve")
    closest = min(ref.curves, key=lambda c: len(differences(c.comparable, run.comparable)))
    diff = differences(closest.comparable, run.comparable)
    return LossVerdict(run.label, f"{where} ({closest.describe()})",
                       refused="reference vs run differ in " + "; ".join(diff))


def check_summaries(summaries: Sequence, cases_dir: Path) -> list[LossVerdict]:
    """A verdict for every ok round of a case that has a loss reference file (none for the others)."""
    cache: dict[str, Optional[LossReferenceFile]] = {}
    out = []
    for summary in summaries:
        case = str(summary.key["case"])
        if case not in cache:
            cache[case] = load(cases_dir, case, f"row {summary.label}")
        if cache[case] is None:
            continue
        for attempt in summary.ok:
            run = RunCurve(attempt)
            verdict = check_run(run, cache[case], str(reference_path(cases_dir, case)))
            out.append(replace(verdict, label=f"{summary.label} {run.label}"))
    return out

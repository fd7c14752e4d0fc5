"""The history as JSON: every workload with its points (figures, noise, contention, compliance, outlier), its
change points (size, interval, verdict, p, date, the first and last run on each side, what changed), the verdict
``--check`` gives it, and the rules that found them."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Sequence

from run_benchmarks.results.history import changes
from run_benchmarks.results.history.analysis import Analysed
from run_benchmarks.results.history.series import FIGURES, Point
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.facts import flat_settings


def _point(a: Analysed, p: Point) -> dict:
    idx = next((i for i, q in enumerate(a.judged) if q is p), None)
    outlier = next((o for o in a.found.outliers if o.index == idx), None) if idx is not None else None
    return {"run_id": p.run_id, "at": p.at.isoformat(), "at_source": p.at_source,
            "figures": {k: p.value(k) for k in FIGURES},
            "memory_kind": p.summary.memory_kind if p.summary else None,
            "log_se": p.log_se(a.workload.figure) if a.workload.figure else None,
            "rounds": len(p.attempts), "ok_rounds_used": len(p.summary.ok) if p.summary else 0,
            "contended": p.contended, "failed": p.failed,
            "outlier": None if outlier is None else {"off": outlier.off, "sigmas": outlier.sigmas,
                                                     "pending": outlier.pending},
            **compliance_marks.export_fields(p.attempts)}


def _shift(a: Analysed, shift: changes.Shift, why) -> dict:
    pts = a.judged
    return {"at": pts[shift.index].at.isoformat(), "run_id": pts[shift.index].run_id, "size": shift.size,
            "interval95": list(shift.interval) if shift.interval else None, "verdict": shift.verdict, "p": shift.p,
            "before": {"first_run": pts[shift.before[0]].run_id, "last_run": pts[shift.before[1]].run_id,
                       "points": shift.points_before},
            "after": {"first_run": pts[shift.after[0]].run_id, "last_run": pts[shift.after[1]].run_id,
                      "points": shift.points_after},
            "changed_here": [asdict(c) for c in why.here],
            "also_changed_earlier_without_effect": [asdict(c) for c in why.earlier]}


def workload(a: Analysed) -> dict:
    w = a.workload
    settings = {k: v for k, v in flat_settings(w.what.spec).items() if not k.startswith("debug.")}
    return {"workload": w.id, "label": w.label, "facts": w.what.facts, "settings": settings,
            "figure": w.figure, "higher_is_better": w.higher_is_better,
            "non_compliant_points": sum(p.non_compliant for p in a.points),
            "noise": {"sigma": a.found.sigma, "source": a.found.sigma_source, "threshold": a.found.threshold},
            "points": [_point(a, p) for p in a.points],
            "change_points": [_shift(a, s, why) for s, why in zip(a.found.shifts, a.explained)],
            "verdict": {"state": a.state, "line": a.line()}}


def to_json(analysed: Sequence[Analysed], heading: str) -> str:
    rules = {"min_shift_points": changes.MIN_SHIFT, "min_points": changes.MIN_POINTS,
             "outlier_sigmas": changes.OUTLIER_SIGMAS, "alpha": changes.ALPHA, "noise_floor": changes.NOISE_FLOOR,
             "method": changes.RULES}
    return json.dumps({"title": heading, "rules": rules, "workloads": [workload(a) for a in analysed]},
                      indent=2, default=str) + "\n"

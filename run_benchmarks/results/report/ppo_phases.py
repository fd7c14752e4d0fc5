"""An RLHF PPO workload's per-phase summary, as ColossalAI chat's benchmark prints it at the end of a run:
experience making and learning, each with its throughput (samples/s, all devices and per device), TFLOP/s
per device and MFU, and the share of the iteration's time it took.

Every value is a figure the PPO worker measured and stored (training/torch/ppo_loop.py ``phase_figures``:
perf records of kind ``figure``, combined over the ranks as each declares), averaged over the workload's ok
rounds by ``figures.task.across_rounds`` like every other figure, except the whole iteration's rates: they are the
row's own (samples/s, TFLOP/s and MFU as show and the results table print them). The only arithmetic here is
each phase's seconds per measured update and over the iteration's. Rows stored before the worker recorded its
phases' seconds (``*.time_s``) show no split. A note adds each phase's measured time breakdown (compute,
communication, other) where the round has one. ``accelbench run`` prints it under its results table and
``accelbench report`` under its (terminal and Markdown).
"""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.results.breakdown.words import ms, of_summary, where
from run_benchmarks.results.figures.task import across_rounds, figures_from_dicts
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary, number
from run_benchmarks.results.report.views import View

PHASES = (("experience", "make experience"), ("learning", "learn"), ("iteration", "whole iteration"))
COLUMNS = ("phase", "samples/s", "samples/s per device", "TFLOP/s per device", "MFU", "time per update",
           "share of iteration")


def phase_figures(summary: CaseSummary) -> tuple[list[dict], int]:
    """Each stored figure (``figures.task.across_rounds``: key, formula, Stats over the ok rounds that reported it),
    and how many rounds had figures."""
    rounds = [a.get("figures") or [] for a in summary.ok]
    rounds = [r for r in rounds if r]
    return across_rounds([figures_from_dicts(r) for r in rounds]), len(rounds)


def _means(summary: CaseSummary) -> tuple[dict[str, float], dict[str, str], int]:
    """Each stored figure's mean over the ok rounds, its formula, and how many rounds had figures."""
    combined, rounds = phase_figures(summary)
    means = {item["key"]: item["stats"]["mean"] for item in combined}
    formulas = {item["key"]: item["formula"] for item in combined if item["formula"]}
    return means, formulas, rounds


def _metric(summary: CaseSummary, name: str) -> Optional[float]:
    """A round's metrics value, from the first ok round (the rounds of one summary share their workload)."""
    values = [(a.get("metrics") or {}).get(name) for a in summary.ok]
    return next((v for v in values if isinstance(v, (int, float))), None)


def _cell(value: Optional[float], percent: bool = False) -> str:
    if value is None:
        return "n/a"  # as the results table says it
    return f"{value:.1%}" if percent else number(value)


def _ms(seconds: Optional[float]) -> str:
    return "n/a" if seconds is None else FIGURE_BY_KEY["step_time_median_s"].fmt(seconds)  # as the step time


def _iteration(summary: CaseSummary, means: dict) -> dict:
    """The whole iteration's rates: the row's own samples/s, TFLOP/s and MFU (one figure in every view: the
    worker's own ``iteration.samples_per_s`` sums each rank's samples over its own clock, which read 13.46
    where show, over the slowest rank's step times, read 13.36)."""
    world = _metric(summary, "world_size")
    rate = summary.mean("samples_per_s")
    return {**means, "iteration.samples_per_s": rate,
            "iteration.samples_per_s_per_device": rate / world if rate is not None and world else None,
            "iteration.tflops_per_device": summary.mean("tflops_per_device"), "iteration.mfu": summary.mean("mfu")}


def ppo_phase_view(summary: CaseSummary) -> Optional[View]:
    """The summary's per-phase table, or None for a workload with no PPO phase figures stored."""
    means, formulas, rounds = _means(summary)
    if "experience.samples_per_s" not in means:
        return None
    means = _iteration(summary, means)
    updates = _metric(summary, "measured_steps")
    iteration_s = means.get("iteration.time_s")
    rows = []
    for part, label in PHASES:
        seconds = means.get(f"{part}.time_s")
        share = seconds / iteration_s if seconds is not None and iteration_s else None
        rows.append([label, _cell(means.get(f"{part}.samples_per_s")),
                     _cell(means.get(f"{part}.samples_per_s_per_device")),
                     _cell(means.get(f"{part}.tflops_per_device")), _cell(means.get(f"{part}.mfu"), percent=True),
                     _ms(seconds / updates if seconds is not None and updates else None),
                     _cell(share, percent=True)])
    notes = [f"the worker's figures (first episode excluded as warm-up), mean over {rounds} ok round(s); "
             "samples/s sums the ranks, per device is their mean; learning counts each sample once per epoch; "
             "the whole iteration's samples/s, TFLOP/s and MFU are the row's own (show and the results table)"]
    if iteration_s is None:
        notes.append("time split: not recorded (rows stored before the worker wrote experience/learning time_s)")
    else:
        other = iteration_s - means.get("experience.time_s", 0.0) - means.get("learning.time_s", 0.0)
        notes.append(f"time per update: each phase's measured seconds per rank (mean over the ranks) over the "
                     f"{number(updates)} measured updates; {_ms(other / updates if updates else None)} of an update "
                     "is neither phase (synchronisation, the step's own bookkeeping)")
    notes += list(dict.fromkeys(f"TFLOP/s: {formulas[k]}" for k in ("experience.tflops", "learning.tflops")
                                if k in formulas))
    notes += list(dict.fromkeys(f"MFU: {formulas[k]}" for k in ("experience.mfu", "learning.mfu") if k in formulas))
    notes += breakdown_note(of_summary(summary))
    label = summary.label if summary.config == "-" else f"{summary.label} {summary.config}"
    return View(f"{label}: PPO phases", list(COLUMNS), rows, notes)


def breakdown_note(tb: Optional[dict]) -> list[str]:
    """Each phase's measured time breakdown (results/breakdown/ppo.py), where the first ok round has one."""
    phases = [(label, ((tb or {}).get("phases") or {}).get(part, {}).get("measured") or {})
              for part, label in PHASES[:2]]
    if not all("serialised_step_s" in m for _, m in phases):
        return []
    said = "; ".join(f"{label} {ms(m['serialised_step_s'])}: compute {ms(m['compute_s'])}, communication "
                     f"{ms(m['communication_s'])}, other {ms(m['other_s'])}" for label, m in phases)
    return [f"time breakdown per update ({tb['measured']['breakdown_steps']} serialised updates "
            f"{where(tb['measured'])}, first ok round): {said}"]


def ppo_phase_views(summaries: Sequence[CaseSummary]) -> list[View]:
    return [v for v in map(ppo_phase_view, summaries) if v is not None]

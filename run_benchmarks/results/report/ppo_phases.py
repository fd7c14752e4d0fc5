"""An RLHF PPO workload's per-phase summary, as ColossalAI chat's benchmark prints it at the end of a run:
experience making and learning, each with its throughput (samples/s, all devices and per device), TFLOP/s
per device and MFU, and the share of the iteration's time it took.

Every value is a figure the PPO worker measured and stored (training/torch/ppo_loop.py ``phase_figures``:
perf records of kind ``figure``, combined over the ranks as each declares), averaged over the workload's ok
rounds by ``figures.across_rounds`` like every other figure; the only arithmetic here is each phase's
seconds over the iteration's. Rows stored before the worker recorded its phases' seconds (``*.time_s``)
show no split. A note adds each phase's measured time breakdown (compute, communication, other) where the round
has one. ``accelbench run`` prints it under its results table and ``accelbench report`` under its
(terminal and Markdown).
"""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.results.breakdown_words import ms, of_summary
from run_benchmarks.results.figures import across_rounds, figures_from_dicts
from run_benchmarks.results.report.summary import CaseSummary, number
from run_benchmarks.results.report.views import View

PHASES = (("experience", "make experience"), ("learning", "learn"), ("iteration", "whole iteration"))
COLUMNS = ("phase", "samples/s", "samples/s per device", "TFLOP/s per device", "MFU", "time (s)",
           "share of iteration")


def phase_figures(summary: CaseSummary) -> tuple[list[dict], int]:
    """Each stored figure (``figures.across_rounds``: key, formula, Stats over the ok rounds that reported it),
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


def _cell(value: Optional[float], scale: float = 1.0, percent: bool = False) -> str:
    if value is None:
        return ""
    return f"{value * scale:.1%}" if percent else number(value * scale)


def ppo_phase_view(summary: CaseSummary) -> Optional[View]:
    """The summary's per-phase table, or None for a workload with no PPO phase figures stored."""
    means, formulas, rounds = _means(summary)
    if "experience.samples_per_s" not in means:
        return None
    iteration_s = means.get("iteration.time_s")
    rows = []
    for part, label in PHASES:
        seconds = means.get(f"{part}.time_s")
        share = seconds / iteration_s if seconds is not None and iteration_s else None
        rows.append([label, _cell(means.get(f"{part}.samples_per_s")),
                     _cell(means.get(f"{part}.samples_per_s_per_device")),
                     _cell(means.get(f"{part}.tflops_per_device")), _cell(means.get(f"{part}.mfu"), percent=True),
                     _cell(seconds), _cell(share, percent=True)])
    notes = [f"the worker's figures (first episode excluded as warm-up), mean over {rounds} ok round(s); "
             "samples/s sums the ranks, per device is their mean; learning counts each sample once per epoch"]
    if iteration_s is None:
        notes.append("time split: not recorded (rows stored before the worker wrote experience/learning time_s)")
    else:
        other = iteration_s - means.get("experience.time_s", 0.0) - means.get("learning.time_s", 0.0)
        notes.append(f"time: measured steps' seconds per rank, mean over the ranks; {number(other)} s of the "
                     "iteration is neither phase (synchronisation, the step's own bookkeeping)")
    notes += list(dict.fromkeys(f"TFLOP/s: {formulas[k]}" for k in ("experience.tflops", "learning.tflops")
                                if k in formulas))
    notes += list(dict.fromkeys(f"MFU: {formulas[k]}" for k in ("experience.mfu", "learning.mfu") if k in formulas))
    notes += breakdown_note(of_summary(summary))
    label = summary.label if summary.config == "-" else f"{summary.label} {summary.config}"
    return View(f"{label}: PPO phases", list(COLUMNS), rows, notes)


def breakdown_note(tb: Optional[dict]) -> list[str]:
    """Each phase's measured time breakdown (results/breakdown_ppo.py), where the first ok round has one."""
    phases = [(label, ((tb or {}).get("phases") or {}).get(part, {}).get("measured") or {})
              for part, label in PHASES[:2]]
    if not all("serialised_step_s" in m for _, m in phases):
        return []
    said = "; ".join(f"{label} {ms(m['serialised_step_s'])}: compute {ms(m['compute_s'])}, communication "
                     f"{ms(m['communication_s'])}, other {ms(m['other_s'])}" for label, m in phases)
    return [f"time breakdown per update ({tb['measured']['breakdown_steps']} serialised updates after the measured "
            f"ones, first ok round): {said}"]


def ppo_phase_views(summaries: Sequence[CaseSummary]) -> list[View]:
    return [v for v in map(ppo_phase_view, summaries) if v is not None]

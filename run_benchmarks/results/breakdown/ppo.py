"""An RLHF PPO round's time breakdown: per phase of a learning update (experience making, learning) and for the
whole update, measured beside expected, as ``metrics.time_breakdown``.

Each PPO rank sends one breakdown record per phase (training/torch/ppo_breakdown.py says how they are timed). A
phase is read as a step is (breakdown/step.py: the slowest rank's compute, the ranks' median communication, the rest
of the slowest rank's serialised phase); the whole update is each rank's phases added step by step, read the
same way, so ``measured``/``expected`` keep pretraining's layout and ``phases: {experience: ..., learning: ...}``
holds one breakdown of that layout per phase (with its ``label``).

Expected compute per phase = the phase's model FLOPs on one device in one learning update
(``flops.ppo_phase_flops``: generation + the scoring forwards for experience, each also a part of its own;
``max_epochs`` passes of learning) / the calibrated GEMM peak; the whole update's is their sum over the peak.
Collectives are priced as pretraining's (step.expected). Each phase sets its serialised time beside the
measured updates' mean of the same phase (the worker's ``<phase>.time_s`` figure over the measured updates).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from training.contract import flops as flop_counts
from training.contract import batch, perflog
from training.contract.spec import WorkloadSpec

from run_benchmarks.results.breakdown import step as step_breakdown, words

PHASES = {"experience": "experience making", "learning": "learning"}


def phase_flops(workload: WorkloadSpec) -> dict[str, float]:
    """Model FLOPs of one device in one learning update: per phase, and experience's generation and scoring."""
    ppo = workload.ppo
    per_sample = flop_counts.ppo_phase_flops(workload.model, ppo.critic_model(workload.model), ppo.prompt_length,
                                             ppo.generation_length, workload.train)
    made = batch.replica_batch(workload)  # samples this rank makes per update
    generation, scoring = made * per_sample["generation"].total, made * per_sample["forwards"].total
    return {"generation": generation, "scoring": scoring, "experience": generation + scoring,
            "learning": made * ppo.max_epochs * per_sample["learning"].total}


def summed(records: Sequence[perflog.BreakdownRecord]) -> perflog.BreakdownRecord:
    """One rank's phases as its whole update: every per-step list added step by step, the collectives in order."""
    first = records[0]
    per_step = {name: [sum(values) for values in zip(*(getattr(r, name) for r in records))]
                for name in perflog.BreakdownRecord.PER_STEP}
    ops = [op for r in records for op in (r.collective_ops or ["allreduce"] * len(r.bucket_bytes))]
    return perflog.BreakdownRecord(rank=first.rank, steps=first.steps, bucket_bytes=[b for r in records
                                                                                     for b in r.bucket_bytes],
                                   collective_ops=ops, group_size=first.group_size, method=first.method, **per_step)


def _whole(records: Sequence[perflog.BreakdownRecord]) -> list[perflog.BreakdownRecord]:
    """Each rank's whole update where it measured every phase, else the records that say why not."""
    why = [r for r in records if not r.steps or r.not_measured]
    if why:
        return why
    ranks: dict[int, list] = {}
    for r in records:
        ranks.setdefault(r.rank, []).append(r)
    if any(sorted(r.phase for r in rs) != sorted(PHASES) for rs in ranks.values()):
        return [perflog.BreakdownRecord(rank=-1, steps=0, not_measured="not measured: a rank reported only some "
                                                                       "of the PPO phases")]
    return [summed(sorted(rs, key=lambda r: list(PHASES).index(r.phase))) for rs in ranks.values()]


def lever(tb: dict) -> Optional[str]:
    """The phase that took most of the serialised update, then its own lever (the part that loses the most);
    in the other phase, a part priced from these hosts' measurement that runs far below it, and a straggler."""
    phases = {name: p for name, p in (tb.get("phases") or {}).items() if "serialised_step_s" in p["measured"]}
    whole = tb["measured"].get("serialised_step_s")
    if not phases or not whole:
        return None
    name = max(phases, key=lambda n: phases[n]["measured"]["serialised_step_s"])
    top = phases[name]
    seconds = top["measured"]["serialised_step_s"]
    text = f"{top['label']} is {seconds / whole:.0%} of the serialised update ({words.ms(seconds)})"
    inner = top.get("lever")
    text += f": {inner}" if inner else ""
    for other, phase in phases.items():
        if other == name:
            continue
        said = [part.text for part in words.lever_parts(phase, of="the phase") if part.far_below]
        s = phase["measured"].get("straggler")
        said += [words.straggler(s)] if s else []
        text += "".join(f"; in {phase['label']}, {line}" for line in said)
    return text


def added_up(whole: dict, phases: dict) -> dict:
    """The whole update's measured parts as its phases' parts added, each phase read as a step is (its slowest
    rank's compute, the ranks' median communication): so they add up. Each rank's phases summed step by step
    and read at the rank's median update (``_whole``) need not: the median update of the sum is another update
    than each phase's median, and the median rank another rank (the whole's communication read 126 ms against
    learning's own 209 ms)."""
    parts = [p["measured"] for p in phases.values()]
    if whole.get("not_measured") or any("serialised_step_s" not in m for m in parts):
        return whole
    total = {key: math.fsum(m[key] for m in parts)
             for key in ("compute_s", "communication_s", "other_s", "serialised_step_s")}
    return {**whole, **total, "summed_from": "phases"}


def time_breakdown(records: Sequence[perflog.BreakdownRecord], metrics: dict, workload: WorkloadSpec,
                   figures: dict, measured_peak: tuple, datasheet_peak: tuple, nodes: Sequence[dict],
                   allreduce_rows: Sequence[dict], measure_busbw: str) -> dict:
    """``metrics.time_breakdown`` of a PPO round; ``figures``: the round's figures by name (``<phase>.time_s``:
    the measured updates' seconds of each phase per rank), the rest as step.time_breakdown takes them."""
    counted = phase_flops(workload)
    stand_ins = [r for r in records if r.phase is None]  # a rank that reported nothing: every phase lacks it
    phases = {}
    for phase, label in PHASES.items():
        total_s, updates = figures.get(f"{phase}.time_s"), metrics.get("measured_steps")
        step = {"median": total_s / updates if total_s is not None and updates else None,
                "cv": (metrics.get("step_time_s") or {}).get("cv")}  # the updates' noise: the straggler's margin
        phase_records = [r for r in records if r.phase == phase] + stand_ins
        part = step_breakdown.time_breakdown(phase_records, {"step_time_s": step}, measured_peak, datasheet_peak,
                                             nodes, allreduce_rows, measure_busbw, flops=counted[phase])
        if phase == "experience" and part["expected"].get("compute_s") is not None:
            part["expected"]["compute_parts"] = {name: step_breakdown.compute_seconds(counted[name], measured_peak[0])
                                                 for name in ("generation", "scoring")}
        part["lever"] = words.lever(part, of="the phase")
        phases[phase] = {"label": label, **part}
    out = step_breakdown.time_breakdown(_whole(records), metrics, measured_peak, datasheet_peak, nodes,
                                        allreduce_rows, measure_busbw,
                                        flops=counted["experience"] + counted["learning"])
    out.update(unit="update", phases=phases, measured=added_up(out["measured"], phases))
    out["lever"] = lever(out) if not out["measured"].get("not_measured") else None
    return out

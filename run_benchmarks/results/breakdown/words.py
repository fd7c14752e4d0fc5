"""The words every view prints for a step-time breakdown (breakdown/step.py assembles it): the lever line, the lines
of ``accelbench show``, the part compare says changed most, and the small formatting they share. Reads only the
``metrics.time_breakdown`` dict, so show, report (terminal, Markdown, HTML) and compare say the same thing."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from run_benchmarks.results.breakdown import pipeline
from run_benchmarks.results.rounds.metrics_shape import breakdown_of
from training.contract import perflog

# measured compute this many times its expected figure: the step is bound by per-operation overhead, not GEMM
# speed (an H200 ran gpt3_tiny's 5.5 ms compute against 0.0045 ms expected; gpt2_xl's was 2.4x)
OVERHEAD_BOUND_RATIO = 10.0
OVERHEAD_BOUND = ("it takes {ratio:,.0f}x its time at the full peak: the step is far from GEMM-bound (operations "
                  "too small to fill the device, launch and framework overhead, or a busy host set the pace); a "
                  "larger micro batch or train.compile would help more than faster GEMMs")


# What each part of a step could take at best, for the lever (README "Where each step's time goes"):
ACHIEVABLE_MFU = 0.5  # compute: its model FLOPs at half the calibrated GEMM peak (a step is more than its GEMMs;
#                       well-tuned large-model training reaches 40-60 % of the peak)
FAR_BELOW = 3.0  # communication priced from the bus bandwidth stored for these hosts, taking this many times
#                  its price (running at a third of that bandwidth or less) ...
NAMED_SAVING = 0.05  # ... and losing at least this share of the step: named in the lever, whatever else leads


@dataclass(frozen=True)
class Part:
    """One part of the step for the lever: what it loses against what is achievable (``lost``; where nothing
    prices it, its whole time: the most it can lose), whether it is priced from a measurement on these hosts
    and runs far below it (``far_below``: always named), and its words."""

    name: str
    lost: float
    far_below: bool
    text: str


def lever(breakdown: dict, of: str = "the serialised step") -> Optional[str]:
    """The part of the measured step (``of``: what it is a part of) that loses the most time against what is
    achievable, in plain words with the time to gain; then every part priced from a measurement on these hosts
    (communication at the stored bus bandwidth) that runs far below it, with the time it would save; then the
    straggler. Compute's named parts (PPO's generation and scoring) each against theirs."""
    parts = lever_parts(breakdown, of)
    if not parts:
        return None
    top, *rest = sorted(parts, key=lambda part: -part.lost)
    text = "; ".join([top.text] + [part.text for part in rest if part.far_below])
    m = breakdown["measured"]
    if m.get("straggler") and m.get("pipeline"):
        text += "; " + pipeline_straggler(m["straggler"])
    elif m.get("straggler"):
        text += "; " + straggler(m["straggler"])
    return text


def lever_parts(breakdown: dict, of: str = "the serialised step") -> list[Part]:
    """Each part of the measured step with what it loses (``Part``); empty where nothing was measured."""
    m, e = breakdown.get("measured") or {}, breakdown.get("expected") or {}
    if m.get("not_measured") or "compute_s" not in m:
        return []
    seconds = {"compute": m["compute_s"], "communication": m["communication_s"], "other": m["other_s"],
               **({"pipeline": m["pipeline_wait_s"]} if "pipeline_wait_s" in m else {})}
    total = math.fsum(seconds.values())
    if total <= 0:
        return []

    def share(name: str) -> str:
        return f"{name} is {seconds[name] / total:.0%} of {of} ({ms(seconds[name])}"

    out = [_compute(m, e, share("compute")), _communication(m, e, share("communication"), total),
           Part("other", m["other_s"], False, share("other") + "): data fetch, optimizer and host overhead")]
    if "pipeline" in seconds:
        out.append(Part("pipeline", seconds["pipeline"], False, pipeline_lever(m, e, seconds["pipeline"] / total)))
    return out


def _compute(m: dict, e: dict, said: str) -> Part:
    inside = f": {listed(m['compute_parts'])}" if m.get("compute_parts") else ""
    if not e.get("compute_s"):
        return Part("compute", m["compute_s"], False, f"{said}{inside}); no calibrated GEMM peak prices it")
    achievable = e["compute_s"] / ACHIEVABLE_MFU
    parts = {name: value / ACHIEVABLE_MFU for name, value in (e.get("compute_parts") or {}).items()}
    lost = max(0.0, m["compute_s"] - achievable)
    text = (f"{said}{inside}); at {ACHIEVABLE_MFU:.0%} of the calibrated GEMM peak it would take "
            f"{ms(achievable)}{named(parts)}" + (f": {ms(lost)} to gain" if lost else ": it runs faster than that"))
    ratio = m["compute_s"] / e["compute_s"]
    if ratio > OVERHEAD_BOUND_RATIO:
        text += "; " + OVERHEAD_BOUND.format(ratio=ratio)
    return Part("compute", lost, False, text)


def _communication(m: dict, e: dict, said: str, total: float) -> Part:
    measured, price = m["communication_s"], e.get("communication_s")
    if not price:  # not priced (no stored busbw), or no collective to price
        why = "" if price == 0 or not measured else "; no bus bandwidth stored for these hosts prices it"
        return Part("communication", measured, False, f"{said}){why}")
    lost = max(0.0, measured - price)
    at = f"{price / measured:.0%} of" if measured > 0 else "more than"  # a clock's resolution can read 0
    text = (f"{said}); the {ops_text(m)} of {m['gradient_bytes'] / 1e6:.3g} MB ran at {at} the bus bandwidth these "
            f"hosts measured ({ms(price)} at it)" + (f": {ms(lost)} would be saved" if lost else ""))
    return Part("communication", lost, measured >= FAR_BELOW * price and lost >= NAMED_SAVING * total, text)


def straggler(s: dict) -> str:
    above = f"{s['compute_s'] / s['median_compute_s'] - 1:.0%} above it" if s["median_compute_s"] > 0 else "above it"
    return (f"rank {s['rank']} is a straggler (compute {ms(s['compute_s'])} against the median "
            f"{ms(s['median_compute_s'])}: {above}, past {s.get('margin_basis') or 'the margin'})")


def ops_text(m: dict) -> str:
    """``3 allreduce + 2 allgather``: the step's collectives by operation."""
    ops = m.get("collective_ops") or ["allreduce"] * m.get("collectives", 0)
    return " + ".join(f"{ops.count(op)} {op}" for op in dict.fromkeys(ops)) or "no collective"


def ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _ms(seconds: float, sign: str = "") -> str:
    """Milliseconds as people write them: three significant digits, whole ms with thousands separators from
    100 ms up (``2,820``, never ``2.82e+03``)."""
    value = seconds * 1e3
    return f"{value:{sign},.0f}" if abs(value) >= 100 else f"{value:{sign}.3g}"


def describe(tb: Optional[dict]) -> list[str]:
    """The breakdown as lines for ``accelbench show``: measured, expected, what is missing, per rank (per phase
    where the task has phases: PPO's experience making and learning), the lever."""
    if not tb:
        return []
    if breakdown_of({"time_breakdown": tb}) is None:
        return ["time breakdown: not of the shape accelbench writes; not shown"]
    m, e, unit = tb.get("measured") or {}, tb.get("expected") or {}, tb.get("unit") or "step"
    if m.get("not_measured"):
        lines = [f"time breakdown: {m['not_measured']}"]
    else:
        lines = [f"time breakdown per {unit}, measured on {m['breakdown_steps']} serialised {unit}s {where(m)}: "
                 f"{_parts(m)}; serialised {unit} {ms(m['serialised_step_s'])} against the measured "
                 f"{unit}s' median {ms(m['step_time_s'])}"]
        lines += [f"  {pipeline_measured(m)}"] if m.get("pipeline") else []
    lines.append(f"  expected: compute {ms(e.get('compute_s'))} (datasheet peak: "
                 f"{ms(e.get('compute_s_datasheet'))}), communication {ms(e.get('communication_s'))} "
                 f"[{e.get('communication_formula')}], other not modelled")
    lines += [pipeline_expected(e)] if e.get("bubble_formula") else []
    lines += [f"  missing: {why}" for why in e.get("missing") or []]
    phases = tb.get("phases") or {}
    lines += [_rank_line(row, "  ") for row in ([] if phases else m.get("per_rank") or [])]
    for phase in phases.values():  # each a breakdown of its own: its share of the whole, its parts, its ranks
        pm, pe = phase.get("measured") or {}, phase.get("expected") or {}
        if pm.get("not_measured"):
            continue
        share = pm["serialised_step_s"] / m["serialised_step_s"] if m.get("serialised_step_s") else None
        lines.append(f"  {phase['label']}: {'' if share is None else f'{share:.0%} of the serialised {unit}, '}"
                     f"{_parts(pm)}; serialised {ms(pm['serialised_step_s'])} against the measured {unit}s' mean "
                     f"{ms(pm.get('step_time_s'))}")
        lines.append(f"    expected: compute {ms(pe.get('compute_s'))}{named(pe.get('compute_parts'))}, "
                     f"communication {ms(pe.get('communication_s'))}")
        lines += [_rank_line(row, "    ") for row in pm.get("per_rank") or []]
    if tb.get("lever"):
        lines.append(f"  biggest lever: {tb['lever']}")
    energy = tb.get("energy")
    if energy and energy.get("energy_per_token_j") is not None:
        lines.append(f"  energy over the measured steps: {energy['energy_per_token_j']:.4g} J per token, "
                     f"{energy['tokens_per_kwh']:,.4g} tokens per kWh ({energy['method']})")
    elif energy:
        lines.append(f"  energy: {energy['note']}")
    return lines


def where(m: dict) -> str:
    """Where the breakdown steps ran, as the records' method says: the last warm-up steps, or after the measured
    ones (every record before the warm-up placement)."""
    return perflog.BREAKDOWN_IN_WARMUP if perflog.BREAKDOWN_IN_WARMUP in (m.get("method") or "") \
        else perflog.BREAKDOWN_AFTER


def _parts(m: dict) -> str:
    waiting = f"pipeline waiting {ms(m['pipeline_wait_s'])}, " if m.get("pipeline") else ""
    return (f"compute {ms(m['compute_s'])}{named(m.get('compute_parts'))}, {waiting}communication "
            f"{ms(m['communication_s'])} ({ops_text(m)}, {m['gradient_bytes']:,} bytes), other {ms(m['other_s'])}")


def listed(parts: dict) -> str:
    return ", ".join(f"{name} {ms(value)}" for name, value in parts.items())


def named(parts: Optional[dict]) -> str:
    """`` (generation 900 ms, scoring 40 ms)``: compute's named parts, or nothing."""
    return f" ({listed(parts)})" if parts else ""


def _rank_line(row: dict, indent: str) -> str:
    waiting = f", pipeline waiting {ms(row['pipeline_wait_s'])}" if "pipeline_wait_s" in row else ""
    return (f"{indent}{stage_label(row)}: compute {ms(row['compute_s'])}{named(row.get('compute_parts'))}"
            f"{waiting}, wait {ms(row['wait_s'])}, communication {ms(row['communication_s'])}, data "
            f"{ms(row['data_s'])}, optimizer {ms(row['optimizer_s'])}")


def of_summary(summary) -> Optional[dict]:
    """The measured breakdown of a report row (a CaseSummary): its first ok round's, None where not measured."""
    for attempt in (summary.ok[:1] if summary is not None else []):
        tb = breakdown_of(attempt.get("metrics"))  # only a breakdown of the shape these words read
        if tb and not (tb.get("measured") or {}).get("not_measured"):
            return tb
    return None


def changed_part(a: Optional[dict], b: Optional[dict]) -> Optional[str]:
    """Compare's line: which measured part of the step changed most from A to B, with both values (and, for a
    task with phases, each phase's serialised time)."""
    if not a or not b:
        return None
    ma, mb = a["measured"], b["measured"]
    parts = {key: name for key, name in (("compute_s", "compute"), ("communication_s", "communication"),
                                         ("pipeline_wait_s", "pipeline waiting"), ("other_s", "other"))
             if key in ma or key in mb}  # a step without a pipeline waits on none: 0 against one that does
    was, now = ({key: m.get(key, 0.0) for key in parts} for m in (ma, mb))
    key = max(parts, key=lambda k: abs(now[k] - was[k]))
    text = (f"the {a.get('unit') or 'step'}'s {parts[key]} changed most: {_ms(was[key])} ms -> "
            f"{_ms(now[key])} ms ({_ms(now[key] - was[key], '+')} ms; "
            + ", ".join(f"{name} {_ms(was[k])} -> {_ms(now[k])}" for k, name in parts.items()) + " ms)")
    pa, pb = a.get("phases") or {}, b.get("phases") or {}
    moved = [f"{pa[p]['label']} {ms(pa[p]['measured']['serialised_step_s'])} -> "
             f"{ms(pb[p]['measured']['serialised_step_s'])}" for p in pa
             if p in pb and "serialised_step_s" in pa[p]["measured"] and "serialised_step_s" in pb[p]["measured"]]
    return text + (f"; by phase: {', '.join(moved)}" if moved else "")


def changed_parts(rows) -> list[tuple[str, str]]:
    """(row label, ``changed_part`` line) of each compare row whose two sides both measured a breakdown: the
    terminal, Markdown and HTML compare all print these."""
    pairs = [(row.label, changed_part(of_summary(row.a), of_summary(row.b))) for row in rows]
    return [(label, line) for label, line in pairs if line]


# the pipeline's words (its figures: breakdown/pipeline.py)


def stage_label(row: dict) -> str:
    """``rank 1 (stage 1)``, ``rank 0 (stages 0, 2)``."""
    stages = row.get("stages") or []
    return f"rank {row['rank']}" + (f" (stage{'s' if len(stages) > 1 else ''} {', '.join(map(str, stages))})"
                                    if stages else "")


def pipeline_measured(m: dict) -> str:
    facts, share = m["pipeline"], m["waiting_fraction"]
    return (f"pipeline {facts['schedule']} over {facts['ranks']} ranks, {facts['stages']} stages, "
            f"{facts['micro_batches']} micro-batches: its waiting is the bubble and the P2P transfers together, "
            f"{'—' if share is None else f'{share:.0%}'} of the slowest stage's compute + waiting; {facts['sends']} "
            f"P2P sends, {facts['send_bytes']:,} bytes per step")


def pipeline_expected(e: dict) -> str:
    return (f"  expected pipeline bubble: {e['bubble_fraction']:.0%} of compute + bubble "
            f"[{e['bubble_formula']}], {ms(e['bubble_s'])} at the calibrated GEMM peak; {_pipeline_p2p(e)}")


def _pipeline_p2p(e: dict) -> str:
    """The P2P price in words: at most so long (whose sends, at which busbw), or why not priced."""
    if e.get("p2p_s") is None:
        return "P2P not priced (missing below)"
    if not e.get("p2p_busbw"):
        return f"P2P 0 ms (rank {e['p2p_rank']} sends nothing)"
    b = e["p2p_busbw"]
    return (f"P2P at most {ms(e['p2p_s'])}: rank {e['p2p_rank']}'s {e['p2p_rank_sends']} sends of "
            f"{b['send_bytes']:,} bytes at the stored sendrecv busbw {b['busbw_gbps']:,.4g} GB/s (2 ranks, measured "
            f"at {b['measured_at_bytes']:,} bytes; {b['source']}) [{pipeline.P2P_PRICE}]")


def pipeline_lever(m: dict, e: dict, share: float) -> str:
    """The lever's words when the pipeline's waiting is the biggest part."""
    text = (f"pipeline waiting (bubble and P2P transfers) is {share:.0%} of the serialised step "
            f"({ms(m['pipeline_wait_s'])})")
    if e.get("bubble_fraction") is not None:
        text += (f"; the {m['pipeline']['schedule']} schedule's ideal bubble is {e['bubble_fraction']:.0%} "
                 f"({e['bubble_formula']}): more micro-batches shrink it")
    if e.get("p2p_busbw"):
        text += (f"; its P2P sends at the sendrecv bandwidth these hosts measured take at most {ms(e['p2p_s'])} "
                 f"of it")
    return text


def pipeline_straggler(s: dict) -> str:
    return (f"{stage_label(s)} is the pipeline's slowest stage (compute {ms(s['compute_s'])} against the median "
            f"{ms(s['median_compute_s'])}): the other stages wait for it")

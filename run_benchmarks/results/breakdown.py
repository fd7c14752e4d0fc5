"""Where a step's time goes: measured (the workers' breakdown records) beside expected (this machine's own
micro-benchmarks), as ``metrics.time_breakdown``.

Measured, per step (training/breakdown.py says how the phases were timed), each rank read at its median
breakdown step (by the step's whole time), all phases from that one step so that they add up:
  compute_s        the slowest rank's forward+backward (every rank waits for it in the all-reduce)
  communication_s  the median over ranks of their gradient collectives (issued after a barrier)
  other_s          the slowest rank's serialised step less those two: data fetch, optimizer, host overhead
A straggler is named when its compute is more than ``STRAGGLER_MARGIN`` above the median rank's. A pipeline adds
its waiting (bubble and P2P transfers) as a fourth part, taken out of other_s (breakdown_pipeline.py: measured,
and the schedule's ideal bubble expected); its straggler is the slowest stage.

Expected, per step and device:
  compute_s        the step's model FLOPs on one device / the GEMM peak ``accelbench calibrate`` measured at
                   the precision (compute_s_datasheet: the same over the vendor's datasheet peak); the FLOPs
                   are the measured steps' own (``step_flops_per_device``): real tokens only for instruction
                   data, the figure the row's MFU is computed from
  communication_s  each collective the workers recorded for a step, priced by nccl-tests' bus bandwidth
                   definition read backwards: time = bytes x factor / busbw, factor 2(n-1)/n for an all-reduce
                   (DDP's buckets), (n-1)/n for an all-gather and a reduce-scatter (FSDP's parameters and
                   gradients), 1 for a broadcast (ZeRO-1's parameter sync) and a reduce (Paddle sharding),
                   with busbw the stored micro case of that operation (one of ``COLLECTIVE_CASES``) at the
                   nearest message size, for the same group size n, on the same hosts
  other_s          not modelled (None)
A missing figure is named with the command that measures it (or, where no command measures it, said so);
nothing is filled in.

A task whose step has phases (PPO's learning update: breakdown_ppo.py) adds ``phases``, each a breakdown of
this same layout with its ``label``, and ``unit`` (``update``); ``describe``, ``lever`` and ``changed_part``
read them without knowing the task. Over 300 lines: measured, expected, the lever and the lines every view
prints (show, report, compare) read one layout and share its small formatting helpers; the pipeline's own
figures and words live in breakdown_pipeline.py.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from training.contract import perflog

from run_benchmarks.results import breakdown_pipeline as pipeline

STRAGGLER_MARGIN = 0.10  # above the median rank's compute by more than this: named
# measured compute this many times its expected figure: the step is bound by per-operation overhead, not GEMM
# speed (an H200 ran gpt3_tiny's 5.5 ms compute against 0.0045 ms expected; gpt2_xl's was 2.4x)
OVERHEAD_BOUND_RATIO = 10.0
ALLREDUCE_FORMULA = "time = bytes x 2(n-1)/n / busbw (nccl-tests' bus bandwidth; one all-reduce per bucket)"
# nccl-tests' bus-bandwidth factors (training/micro/formulas.py measures busbw with the same ones)
BUS_FACTORS = {"allreduce": ("2(n-1)/n", lambda n: 2 * (n - 1) / n), "allgather": ("(n-1)/n", lambda n: (n - 1) / n),
               "reducescatter": ("(n-1)/n", lambda n: (n - 1) / n), "broadcast": ("1", lambda n: 1.0),
               "reduce": ("1", lambda n: 1.0)}
COLLECTIVE_CASES = tuple(BUS_FACTORS)  # the micro cases whose stored busbw prices a step's collectives
COMPUTE_FORMULA = "time = model FLOPs of the step on one device / GEMM peak"


def allreduce_seconds(nbytes: int, ranks: int, busbw_gbps: float) -> float:
    """Seconds an all-reduce of ``nbytes`` over ``ranks`` takes at a bus bandwidth of ``busbw_gbps`` GB/s."""
    return collective_seconds("allreduce", nbytes, ranks, busbw_gbps)


def collective_seconds(op: str, nbytes: int, ranks: int, busbw_gbps: float) -> float:
    """Seconds collective ``op`` of ``nbytes`` (nccl-tests' message size) over ``ranks`` takes at ``busbw_gbps``."""
    return nbytes * BUS_FACTORS[op][1](ranks) / (busbw_gbps * 1e9)


def formula(ops: Sequence[str]) -> str:
    return "; ".join(f"{op}: time = bytes x {BUS_FACTORS[op][0]} / busbw({op})" for op in dict.fromkeys(ops)) + \
        " (nccl-tests' bus bandwidth, each collective at its own size)"


def compute_seconds(flops: float, tflops: float) -> float:
    return flops / (tflops * 1e12)


@dataclass(frozen=True)
class BusBw:
    gbps: float
    nbytes: int  # the message size it was measured at
    ranks: int
    source: str  # which stored attempt


def busbw_points(rows: Sequence[dict], hosts: frozenset, ranks: int, op: str = "allreduce") -> list[BusBw]:
    """The ``op`` busbw figures of the newest ok attempt holding them on exactly ``hosts`` with ``ranks``."""
    for row in reversed(rows):
        if row.get("status") != "ok" or _hosts(row) != hosts:
            continue
        points = [BusBw(float(f["value"]), int(f["params"]["bytes"]), int(f["params"]["ranks"]),
                        f"{row.get('case_name')}, run {row.get('run_id')}")
                  for f in row.get("figures") or [] if f.get("name") == f"{op}.busbw_gbps"
                  and (f.get("params") or {}).get("ranks") == ranks and f.get("value")]
        if points:
            return points
    return []


def _hosts(row: dict) -> frozenset:
    nodes = (row.get("environment") or {}).get("nodes") or []
    return frozenset((node.get("environment") or {}).get("hostname") or str(node.get("host")) for node in nodes)


def nearest(points: Sequence[BusBw], nbytes: int) -> BusBw:
    """The point measured at the message size nearest ``nbytes`` (on a log scale; no interpolation)."""
    return min(points, key=lambda p: abs(math.log(p.nbytes) - math.log(max(nbytes, 1))))


def measured(records: Sequence[perflog.BreakdownRecord], step_time_s: Optional[float]) -> dict:
    """The measured part from each rank's breakdown record; ``step_time_s``: the measured steps' median."""
    done = [r for r in records if r.steps and not r.not_measured]
    if not done or len(done) < len(records):
        reasons = sorted({r.not_measured or "no breakdown steps" for r in records if not r.steps or r.not_measured})
        return {"not_measured": "; ".join(reasons) or "no rank reported a breakdown"}
    med = statistics.median
    per_rank = []
    for r in sorted(done, key=lambda r: r.rank):
        # the rank's median breakdown step (by its whole time), every phase from that one step: medians taken
        # phase by phase need not add up (a loaded CPU showed PPO's learning as compute 255 ms of parts 114 + 89)
        i = sorted(range(r.steps), key=lambda k: r.step_s[k])[(r.steps - 1) // 2]
        row = {"rank": r.rank, **{name: getattr(r, name)[i] for name in
                                  ("data_s", "compute_s", "wait_s", "communication_s", "optimizer_s", "step_s")},
               **pipeline.rank_row(r, i)}
        row["other_s"] = max(0.0, row["step_s"] - row["compute_s"] - row["communication_s"]
                             - row.get("pipeline_wait_s", 0.0))
        if r.compute_parts:  # named parts of compute (PPO: generation and scoring, actor and critic)
            row["compute_parts"] = {name: values[i] for name, values in r.compute_parts.items()}
        per_rank.append(row)
    slowest = max(per_rank, key=lambda row: row["compute_s"])
    communication = med([row["communication_s"] for row in per_rank])
    median_compute = med([row["compute_s"] for row in per_rank])
    straggler = None
    if len(per_rank) > 1 and slowest["compute_s"] > median_compute * (1 + STRAGGLER_MARGIN):
        straggler = {"rank": slowest["rank"], "compute_s": slowest["compute_s"], "median_compute_s": median_compute,
                     "margin": STRAGGLER_MARGIN, **({"stages": slowest["stages"]} if "stages" in slowest else {})}
    buckets = done[0].bucket_bytes
    ops = list(done[0].collective_ops) or ["allreduce"] * len(buckets)
    return {
        "compute_s": slowest["compute_s"], "communication_s": communication,
        "other_s": max(0.0, slowest["step_s"] - slowest["compute_s"] - communication
                       - slowest.get("pipeline_wait_s", 0.0)),
        "serialised_step_s": slowest["step_s"], "step_time_s": step_time_s,
        "breakdown_steps": done[0].steps, "collectives": len(buckets), "gradient_bytes": sum(buckets),
        "bucket_bytes": list(buckets), "collective_ops": ops, "group_size": done[0].group_size,
        "per_rank": per_rank, "straggler": straggler, "method": done[0].method, **pipeline.measured(done, slowest),
        **({"compute_parts": slowest["compute_parts"]} if "compute_parts" in slowest else {})}


def expected(flops_per_device_step: float, measured_peak: tuple[Optional[float], str],
             datasheet_peak: tuple[Optional[float], str], bucket_bytes: Sequence[int], group_size: int,
             points, measure_busbw: str, ops: Sequence[str] = ()) -> dict:
    """The expected part. ``measured_peak``/``datasheet_peak``: (TFLOP/s, note or why missing);
    ``points``: per operation the stored busbw figures for this group size on these hosts (a list: all-reduce's);
    ``measure_busbw``: the command that stores them, ``{op}`` standing for the operation; ``ops``: each
    collective's operation (empty: all all-reduces)."""
    missing = []
    peak, peak_note = measured_peak
    sheet, sheet_note = datasheet_peak
    ops = list(ops) or ["allreduce"] * len(bucket_bytes)
    points = points if isinstance(points, dict) else {"allreduce": list(points)}
    out: dict = {"compute_formula": COMPUTE_FORMULA, "flops_per_device_step": flops_per_device_step,
                 "compute_s": None, "compute_s_datasheet": None, "other_s": None,
                 "other_note": "not modelled: data fetch, optimizer and host overhead have no micro-benchmark"}
    if peak:
        out["compute_s"], out["compute_peak"] = compute_seconds(flops_per_device_step, peak), peak_note
    else:
        missing.append(peak_note)
    if sheet:
        out["compute_s_datasheet"], out["datasheet_peak"] = compute_seconds(flops_per_device_step, sheet), sheet_note
    out["communication_formula"] = formula(ops) if ops else ALLREDUCE_FORMULA
    lacking = [op for op in dict.fromkeys(ops) if not points.get(op)]
    if group_size <= 1 or not bucket_bytes:
        out["communication_s"] = 0.0
        out["communication_note"] = ("one rank per gradient group: no collective" if group_size <= 1
                                     else "no collective in it")
    elif not lacking:
        used = [nearest(points[op], b) for op, b in zip(ops, bucket_bytes)]
        out["communication_s"] = math.fsum(collective_seconds(op, b, group_size, p.gbps)
                                           for op, b, p in zip(ops, bucket_bytes, used))
        out["busbw"] = [{"op": op, "bucket_bytes": b, "busbw_gbps": p.gbps, "measured_at_bytes": p.nbytes,
                         "source": p.source} for op, b, p in zip(ops, bucket_bytes, used)]
    else:
        out["communication_s"] = None
        missing += [f"no {'all-reduce' if op == 'allreduce' else op} busbw stored for {group_size} ranks on these "
                    f"hosts: run `{measure_busbw.replace('{op}', op)}`" for op in lacking]
    out["missing"] = missing
    return out


def lever(breakdown: dict, of: str = "the serialised step") -> Optional[str]:
    """The biggest part of the measured step (``of``: what it is a part of), in plain words, against its expected
    figure where there is one; compute's named parts (PPO's generation and scoring) each against theirs."""
    m, e = breakdown.get("measured") or {}, breakdown.get("expected") or {}
    if m.get("not_measured") or "compute_s" not in m:
        return None
    parts = {"compute": m["compute_s"], "communication": m["communication_s"], "other": m["other_s"],
             **({"pipeline": m["pipeline_wait_s"]} if "pipeline_wait_s" in m else {})}
    total = math.fsum(parts.values())
    if total <= 0:
        return None
    name = max(parts, key=parts.get)
    share = parts[name] / total
    inside = f": {_listed(m['compute_parts'])}" if name == "compute" and m.get("compute_parts") else ""
    text = f"{name} is {share:.0%} of {of} ({_ms(parts[name])}{inside})"
    if name == "compute" and e.get("compute_s"):
        text += f"; at the calibrated GEMM peak it would take {_ms(e['compute_s'])}{_named(e.get('compute_parts'))}"
        ratio = parts[name] / e["compute_s"]
        if ratio > OVERHEAD_BOUND_RATIO:
            text += (f", {ratio:,.0f}x less: each operation is too small to fill the device, so launch and "
                     "framework overhead set the pace; a larger micro batch or train.compile would help more "
                     "than faster GEMMs")
    elif name == "communication" and e.get("communication_s"):
        ratio = e["communication_s"] / parts[name]
        text += (f"; the {_ops(m)} of {m['gradient_bytes'] / 1e6:.3g} MB ran at {ratio:.0%} of the bus bandwidth "
                 "these hosts measured")
    elif name == "other":
        text += ": data fetch, optimizer and host overhead"
    elif name == "pipeline":
        text = pipeline.lever(m, e, share)
    if m.get("straggler") and m.get("pipeline"):
        text += "; " + pipeline.straggler(m["straggler"])
    elif m.get("straggler"):
        s = m["straggler"]
        text += (f"; rank {s['rank']} is a straggler (compute {_ms(s['compute_s'])} against the median "
                 f"{_ms(s['median_compute_s'])})")
    return text


def step_flops_per_device(metrics: dict) -> float:
    """Mean model FLOPs of one device in a measured step: analyze.py's ``tflops_per_device`` is the measured
    steps' FLOPs / their summed time / world size, so times the mean step time it is their FLOPs / steps /
    world size. Not flops_per_token x tokens_per_step: that counts padding at seq_len for instruction data."""
    return metrics["tflops_per_device"] * 1e12 * metrics["step_time_s"]["mean"]


def time_breakdown(records: Sequence[perflog.BreakdownRecord], metrics: dict, measured_peak: tuple,
                   datasheet_peak: tuple, nodes: Sequence[dict], allreduce_rows: Sequence[dict], measure_busbw: str,
                   by_construction: Optional[tuple] = None, flops: Optional[float] = None) -> dict:
    """``metrics.time_breakdown`` of a round: ``metrics`` its RoundMetrics as a dict, ``nodes`` its results.json
    nodes (which hosts), ``allreduce_rows`` the stored attempts of the ``COLLECTIVE_CASES``;
    ``by_construction``: (collectives, group size, formula) of a layout the workers could not time
    (breakdown_layouts.py), priced where the measured part is missing; ``flops``: the model FLOPs of a step on
    one device where the task counts them itself (PPO's phases: breakdown_ppo.py), else the measured steps'."""
    part = measured(records, (metrics.get("step_time_s") or {}).get("median"))
    buckets = part.get("bucket_bytes") or []
    group = part.get("group_size") or 1
    hosts = _hosts({"environment": {"nodes": list(nodes)}})
    ops = part.get("collective_ops") or []
    points = {op: busbw_points(allreduce_rows, hosts, group, op) for op in dict.fromkeys(ops)} if group > 1 else {}
    flops = step_flops_per_device(metrics) if flops is None else flops
    out = {"measured": part, "expected": expected(flops, measured_peak, datasheet_peak, buckets, group, points,
                                                  measure_busbw, ops)}
    if part.get("not_measured") and by_construction:
        collectives, tp, text = by_construction
        ops = [op for op, _ in collectives]
        points = {op: busbw_points(allreduce_rows, hosts, tp, op) for op in dict.fromkeys(ops)}
        priced = expected(flops, measured_peak, datasheet_peak, [b for _, b in collectives], tp, points,
                          measure_busbw, ops)
        out["expected"] = {**priced, "communication_formula": f"{text}; {priced['communication_formula']}",
                           "collectives": len(ops)}
    elif part.get("pipeline"):
        out["expected"].update(pipeline.expected(part, out["expected"]["compute_s"]))
        out["expected"]["missing"].append(out["expected"]["p2p_missing"])
        if not buckets:
            out["expected"]["communication_note"] = "no gradient collective: the stages hold disjoint parameters"
    elif part.get("not_measured"):
        out["expected"]["communication_s"] = None  # without the worker's buckets there is nothing to price
        out["expected"]["communication_note"] = ("not priced: the collectives of a step come from the workers' "
                                                 f"breakdown records ({part['not_measured']})")
    out["lever"] = lever(out)
    return out


def _ops(m: dict) -> str:
    """``3 allreduce + 2 allgather``: the step's collectives by operation."""
    ops = m.get("collective_ops") or ["allreduce"] * m.get("collectives", 0)
    return " + ".join(f"{ops.count(op)} {op}" for op in dict.fromkeys(ops)) or "no collective"


def _ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def describe(tb: Optional[dict]) -> list[str]:
    """The breakdown as lines for ``accelbench show``: measured, expected, what is missing, per rank (per phase
    where the task has phases: PPO's experience making and learning), the lever."""
    if not tb:
        return []
    m, e, unit = tb.get("measured") or {}, tb.get("expected") or {}, tb.get("unit") or "step"
    if m.get("not_measured"):
        lines = [f"time breakdown: {m['not_measured']}"]
    else:
        lines = [f"time breakdown per {unit}, measured on {m['breakdown_steps']} serialised {unit}s after the "
                 f"measured ones: {_parts(m)}; serialised {unit} {_ms(m['serialised_step_s'])} against the measured "
                 f"{unit}s' median {_ms(m['step_time_s'])}"]
        lines += [f"  {pipeline.describe_measured(m)}"] if m.get("pipeline") else []
    lines.append(f"  expected: compute {_ms(e.get('compute_s'))} (datasheet peak: "
                 f"{_ms(e.get('compute_s_datasheet'))}), communication {_ms(e.get('communication_s'))} "
                 f"[{e.get('communication_formula')}], other not modelled")
    lines += [pipeline.describe_expected(e)] if e.get("bubble_formula") else []
    lines += [f"  missing: {why}" for why in e.get("missing") or []]
    phases = tb.get("phases") or {}
    lines += [_rank_line(row, "  ") for row in ([] if phases else m.get("per_rank") or [])]
    for phase in phases.values():  # each a breakdown of its own: its share of the whole, its parts, its ranks
        pm, pe = phase.get("measured") or {}, phase.get("expected") or {}
        if pm.get("not_measured"):
            continue
        share = pm["serialised_step_s"] / m["serialised_step_s"] if m.get("serialised_step_s") else None
        lines.append(f"  {phase['label']}: {'' if share is None else f'{share:.0%} of the serialised {unit}, '}"
                     f"{_parts(pm)}; serialised {_ms(pm['serialised_step_s'])} against the measured {unit}s' mean "
                     f"{_ms(pm.get('step_time_s'))}")
        lines.append(f"    expected: compute {_ms(pe.get('compute_s'))}{_named(pe.get('compute_parts'))}, "
                     f"communication {_ms(pe.get('communication_s'))}")
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


def _parts(m: dict) -> str:
    waiting = f"pipeline waiting {_ms(m['pipeline_wait_s'])}, " if m.get("pipeline") else ""
    return (f"compute {_ms(m['compute_s'])}{_named(m.get('compute_parts'))}, {waiting}communication "
            f"{_ms(m['communication_s'])} ({_ops(m)}, {m['gradient_bytes']:,} bytes), other {_ms(m['other_s'])}")


def _listed(parts: dict) -> str:
    return ", ".join(f"{name} {_ms(value)}" for name, value in parts.items())


def _named(parts: Optional[dict]) -> str:
    """`` (generation 900 ms, scoring 40 ms)``: compute's named parts, or nothing."""
    return f" ({_listed(parts)})" if parts else ""


def _rank_line(row: dict, indent: str) -> str:
    waiting = f", pipeline waiting {_ms(row['pipeline_wait_s'])}" if "pipeline_wait_s" in row else ""
    return (f"{indent}{pipeline.stage_label(row)}: compute {_ms(row['compute_s'])}{_named(row.get('compute_parts'))}"
            f"{waiting}, wait {_ms(row['wait_s'])}, communication {_ms(row['communication_s'])}, data "
            f"{_ms(row['data_s'])}, optimizer {_ms(row['optimizer_s'])}")


def of_summary(summary) -> Optional[dict]:
    """The measured breakdown of a report row (a CaseSummary): its first ok round's, None where not measured."""
    for attempt in (summary.ok[:1] if summary is not None else []):
        tb = (attempt.get("metrics") or {}).get("time_breakdown")
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
    text = (f"the {a.get('unit') or 'step'}'s {parts[key]} changed most: {was[key] * 1e3:.3g} ms -> "
            f"{now[key] * 1e3:.3g} ms ({(now[key] - was[key]) * 1e3:+.3g} ms; "
            + ", ".join(f"{name} {was[k] * 1e3:.3g} -> {now[k] * 1e3:.3g}" for k, name in parts.items()) + " ms)")
    pa, pb = a.get("phases") or {}, b.get("phases") or {}
    moved = [f"{pa[p]['label']} {_ms(pa[p]['measured']['serialised_step_s'])} -> "
             f"{_ms(pb[p]['measured']['serialised_step_s'])}" for p in pa
             if p in pb and "serialised_step_s" in pa[p]["measured"] and "serialised_step_s" in pb[p]["measured"]]
    return text + (f"; by phase: {', '.join(moved)}" if moved else "")


def changed_parts(rows) -> list[tuple[str, str]]:
    """(row label, ``changed_part`` line) of each compare row whose two sides both measured a breakdown: the
    terminal, Markdown and HTML compare all print these."""
    pairs = [(row.label, changed_part(of_summary(row.a), of_summary(row.b))) for row in rows]
    return [(label, line) for label, line in pairs if line]

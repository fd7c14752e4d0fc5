"""Where a step's time goes: measured (the workers' breakdown records) beside expected (this machine's own
micro-benchmarks), as ``metrics.time_breakdown``.

Measured, per step (training/breakdown.py says how the phases were timed), each rank read at its median
breakdown step (by the step's whole time), all phases from that one step so that they add up:
  compute_s        the slowest rank's forward+backward (every rank waits for it in the all-reduce)
  communication_s  the median over ranks of their gradient collectives (issued after a barrier)
  other_s          the slowest rank's serialised step less those two: data fetch, optimizer, host overhead
A straggler is named when its compute is above the median rank's by more than ``STRAGGLER_MARGIN`` and than
``NOISE_MARGIN`` times the run's own step noise (``straggler_margin``). A pipeline adds
its waiting (bubble and P2P transfers) as a fourth part, taken out of other_s (breakdown/pipeline.py: measured,
and expected the schedule's ideal bubble and, at most, its P2P sends at the stored ``sendrecv`` busbw); its
straggler is the slowest stage.

Expected, per step and device:
  compute_s        the step's model FLOPs on one device / the GEMM peak ``accelbench calibrate`` measured at
                   the precision (compute_s_datasheet: the same over the vendor's datasheet peak); the FLOPs
                   are the measured steps' own (``step_flops_per_device``): real tokens only for instruction
                   data, the figure the row's MFU is computed from
  communication_s  each collective the workers recorded for a step, priced by nccl-tests' bus bandwidth
                   definition read backwards: time = bytes x factor / busbw, factor 2(n-1)/n for an all-reduce
                   (DDP's buckets, tensor parallel's activations), (n-1)/n for an all-gather, a reduce-scatter
                   and an all-to-all (FSDP's parameters and gradients, sequence parallel's activations), 1 for a
                   broadcast (ZeRO-1's parameter sync) and a reduce (Paddle sharding), with busbw the stored
                   micro case of that operation (one of ``COLLECTIVE_CASES``) at the nearest message size, for
                   that collective's own group size n (the record's ``group_sizes``: the tensor-parallel degree
                   for DTensor's, the data-parallel one for FSDP's), on the same hosts
  other_s          not modelled (None)
A missing figure is named with the command that measures it (or, where no command measures it, said so);
nothing is filled in.

A task whose step has phases (PPO's learning update: breakdown/ppo.py) adds ``phases``, each a breakdown of
this same layout with its ``label``, and ``unit`` (``update``); ``describe``, ``lever`` and ``changed_part``
read them without knowing the task. The words every view prints (show, the lever, compare) are in
breakdown/words.py (the pipeline's too); the pipeline's own figures in breakdown/pipeline.py.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence, Union

from run_benchmarks.results.breakdown import pipeline, words
from training.contract import perflog

STRAGGLER_MARGIN = 0.10  # above the median rank's compute by more than this (at least: see straggler_margin): named
NOISE_MARGIN = 3.0  # ... and by more than this many times the run's own step noise (the measured steps' CV)
ALLREDUCE_FORMULA = "time = bytes x 2(n-1)/n / busbw (nccl-tests' bus bandwidth; one all-reduce per bucket)"
# nccl-tests' bus-bandwidth factors (training/micro/formulas.py measures busbw with the same ones)
BUS_FACTORS = {"allreduce": ("2(n-1)/n", lambda n: 2 * (n - 1) / n), "allgather": ("(n-1)/n", lambda n: (n - 1) / n),
               "reducescatter": ("(n-1)/n", lambda n: (n - 1) / n), "broadcast": ("1", lambda n: 1.0),
               "reduce": ("1", lambda n: 1.0), "alltoall": ("(n-1)/n", lambda n: (n - 1) / n),
               "sendrecv": ("1", lambda n: 1.0)}  # a pipeline's point-to-point sends (breakdown/pipeline.py)
COLLECTIVE_CASES = tuple(BUS_FACTORS)  # the micro cases whose stored busbw prices a step's collectives and sends
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


def busbw_points(rows: Sequence[dict], hosts: frozenset, ranks: int, op: str = "allreduce",
                 framework: Optional[str] = None) -> list[BusBw]:
    """The ``op`` busbw figures of the newest ok attempt holding them on exactly ``hosts`` with ``ranks``: of
    ``framework``'s own micro case where one is stored (Paddle's gloo and torch's differ severalfold on a CPU),
    else of any framework's (the figure's ``source`` names which)."""
    if framework is not None:
        own = busbw_points([r for r in rows if r.get("framework") == framework], hosts, ranks, op)
        if own:
            return own
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


def straggler_margin(noise: Optional[float]) -> float:
    """How far above the median rank's compute a rank must be to be named the straggler: ``STRAGGLER_MARGIN``,
    or ``NOISE_MARGIN`` times the run's own step noise where that is larger. A rank's compute in one breakdown
    step varies about as much as a step does, so on a noisy machine two ranks differ by that much with no
    straggler at all (2 ranks of a shared 2-core machine were named at the bare 10 %); three times the CV is
    well past what that noise makes, and a real straggler (a slow device, a busy core) is usually far past it."""
    return max(STRAGGLER_MARGIN, NOISE_MARGIN * noise) if noise and math.isfinite(noise) else STRAGGLER_MARGIN


def margin_basis(noise: Optional[float]) -> str:
    """The straggler's margin in words: which of the two set it."""
    margin = straggler_margin(noise)
    if margin > STRAGGLER_MARGIN:
        return f"a margin of {margin:.0%}: {NOISE_MARGIN:g}x the measured steps' CV of {noise:.1%}"
    return f"the {STRAGGLER_MARGIN:.0%} margin"


def measured(records: Sequence[perflog.BreakdownRecord], step_time_s: Optional[float],
             noise: Optional[float] = None) -> dict:
    """The measured part from each rank's breakdown record; ``step_time_s``: the measured steps' median;
    ``noise``: their coefficient of variation (the run's own step noise, which sets the straggler's margin)."""
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
    straggler, margin = None, straggler_margin(noise)
    if len(per_rank) > 1 and slowest["compute_s"] > median_compute * (1 + margin):
        straggler = {"rank": slowest["rank"], "compute_s": slowest["compute_s"], "median_compute_s": median_compute,
                     "margin": margin, "step_noise": noise, "margin_basis": margin_basis(noise),
                     **({"stages": slowest["stages"]} if "stages" in slowest else {})}
    buckets = done[0].bucket_bytes
    ops = list(done[0].collective_ops) or ["allreduce"] * len(buckets)
    sizes = list(done[0].group_sizes) or [done[0].group_size] * len(buckets)
    return {
        "compute_s": slowest["compute_s"], "communication_s": communication,
        "other_s": max(0.0, slowest["step_s"] - slowest["compute_s"] - communication
                       - slowest.get("pipeline_wait_s", 0.0)),
        "serialised_step_s": slowest["step_s"], "step_time_s": step_time_s,
        "breakdown_steps": done[0].steps, "collectives": len(buckets), "gradient_bytes": sum(buckets),
        "bucket_bytes": list(buckets), "collective_ops": ops, "group_size": done[0].group_size, "group_sizes": sizes,
        "per_rank": per_rank, "straggler": straggler, "method": done[0].method, **pipeline.measured(done, slowest),
        **({"compute_parts": slowest["compute_parts"]} if "compute_parts" in slowest else {})}


def expected(flops_per_device_step: float, measured_peak: tuple[Optional[float], str],
             datasheet_peak: tuple[Optional[float], str], bucket_bytes: Sequence[int],
             group_size: Union[int, Sequence[int]], points, measure_busbw: str, ops: Sequence[str] = ()) -> dict:
    """The expected part. ``measured_peak``/``datasheet_peak``: (TFLOP/s, note or why missing);
    ``group_size``: the ranks every collective spans, or a list of each one's; ``points``: the stored busbw
    figures on these hosts per (operation, group size), or per operation for the one group size (a list:
    all-reduce's); ``measure_busbw``: the command that stores them, ``{op}`` standing for the operation;
    ``ops``: each collective's operation (empty: all all-reduces)."""
    missing = []
    peak, peak_note = measured_peak
    sheet, sheet_note = datasheet_peak
    ops = list(ops) or ["allreduce"] * len(bucket_bytes)
    sizes = [group_size] * len(bucket_bytes) if isinstance(group_size, int) else list(group_size)
    points = points if isinstance(points, dict) else {"allreduce": list(points)}

    def figures(op: str, n: int) -> list:
        return points[(op, n)] if (op, n) in points else points.get(op) or []
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
    priced = [(op, b, n) for op, b, n in zip(ops, bucket_bytes, sizes) if n > 1]  # one rank: no collective
    lacking = list(dict.fromkeys((op, n) for op, _, n in priced if not figures(op, n)))
    if not priced:
        single = group_size <= 1 if isinstance(group_size, int) else all(n <= 1 for n in sizes)
        out["communication_s"] = 0.0
        out["communication_note"] = "one rank per gradient group: no collective" if single else "no collective in it"
    elif not lacking:
        used = [nearest(figures(op, n), b) for op, b, n in priced]
        out["communication_s"] = math.fsum(collective_seconds(op, b, n, p.gbps)
                                           for (op, b, n), p in zip(priced, used))
        out["busbw"] = [{"op": op, "bucket_bytes": b, "ranks": n, "busbw_gbps": p.gbps, "measured_at_bytes": p.nbytes,
                         "source": p.source} for (op, b, n), p in zip(priced, used)]
    else:
        out["communication_s"] = None
        missing += [f"no {'all-reduce' if op == 'allreduce' else op} busbw stored for {n} ranks on these "
                    f"hosts: run `{command(measure_busbw, op, n)}`" for op, n in lacking]
    out["missing"] = missing
    return out


def command(measure_busbw: str, op: str, ranks: int) -> str:
    """``measure_busbw`` for ``op`` over ``ranks``: a group smaller than the round (tensor parallel beside data
    parallel) gets a case of its own size, ``1:ranks`` within one node."""
    text = measure_busbw.replace("{op}", op)
    shape = re.search(r":(\d+):(\d+)$", text)
    if shape and int(shape[1]) * int(shape[2]) != ranks:
        procs = int(shape[2])
        if ranks <= procs or ranks % procs == 0:
            text = text[:shape.start()] + (f":1:{ranks}" if ranks <= procs else f":{ranks // procs}:{procs}")
    return text


def step_flops_per_device(metrics: dict) -> float:
    """Mean model FLOPs of one device in a measured step: figures/analyze.py's ``tflops_per_device`` is the measured
    steps' FLOPs / their summed time / world size, so times the mean step time it is their FLOPs / steps /
    world size. Not flops_per_token x tokens_per_step: that counts padding at seq_len for instruction data."""
    return metrics["tflops_per_device"] * 1e12 * metrics["step_time_s"]["mean"]


def time_breakdown(records: Sequence[perflog.BreakdownRecord], metrics: dict, measured_peak: tuple,
                   datasheet_peak: tuple, nodes: Sequence[dict], allreduce_rows: Sequence[dict], measure_busbw: str,
                   by_construction: Optional[tuple] = None, flops: Optional[float] = None,
                   framework: Optional[str] = None) -> dict:
    """``metrics.time_breakdown`` of a round: ``metrics`` its RoundMetrics as a dict, ``nodes`` its results.json
    nodes (which hosts), ``allreduce_rows`` the stored attempts of the ``COLLECTIVE_CASES``;
    ``by_construction``: (collectives, group size, formula) of a layout the workers could not time
    (breakdown/layouts.py), priced where the measured part is missing; ``flops``: the model FLOPs of a step on
    one device where the task counts them itself (PPO's phases: breakdown/ppo.py), else the measured steps';
    ``framework``: the round's, whose own stored micro cases price its collectives first."""
    steps = metrics.get("step_time_s") or {}
    part = measured(records, steps.get("median"), steps.get("cv"))
    buckets = part.get("bucket_bytes") or []
    sizes = part.get("group_sizes") or [part.get("group_size") or 1] * len(buckets)
    hosts = _hosts({"environment": {"nodes": list(nodes)}})
    ops = part.get("collective_ops") or []
    points = {(op, n): busbw_points(allreduce_rows, hosts, n, op, framework)
              for op, n in dict.fromkeys(zip(ops, sizes)) if n > 1}
    flops = step_flops_per_device(metrics) if flops is None else flops
    group = sizes if buckets else part.get("group_size") or 1  # no collective: what its note says depends on it
    out = {"measured": part, "expected": expected(flops, measured_peak, datasheet_peak, buckets, group, points,
                                                  measure_busbw, ops)}
    if part.get("not_measured") and by_construction:
        collectives, tp, text = by_construction
        ops = [op for op, _ in collectives]
        points = {op: busbw_points(allreduce_rows, hosts, tp, op, framework) for op in dict.fromkeys(ops)}
        priced = expected(flops, measured_peak, datasheet_peak, [b for _, b in collectives], tp, points,
                          measure_busbw, ops)
        out["expected"] = {**priced, "communication_formula": f"{text}; {priced['communication_formula']}",
                           "collectives": len(ops)}
    elif part.get("pipeline"):  # its sends: a sendrecv between two ranks, at the slowest stage's per-send size
        p2p, size = busbw_points(allreduce_rows, hosts, 2, "sendrecv", framework), pipeline.send_size(part)
        out["expected"].update(pipeline.expected(part, out["expected"]["compute_s"],
                                                 nearest(p2p, size) if p2p and size else None,
                                                 command(measure_busbw, "sendrecv", 2)))
        out["expected"]["missing"] += [out["expected"]["p2p_missing"]] if out["expected"]["p2p_missing"] else []
        if not buckets:
            out["expected"]["communication_note"] = "no gradient collective: the stages hold disjoint parameters"
    elif part.get("not_measured"):
        out["expected"]["communication_s"] = None  # without the worker's buckets there is nothing to price
        out["expected"]["communication_note"] = ("not priced: the collectives of a step come from the workers' "
                                                 f"breakdown records ({part['not_measured']})")
    out["lever"] = words.lever(out)
    return out

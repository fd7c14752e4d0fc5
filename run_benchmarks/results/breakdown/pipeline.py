"""The pipeline's figures in the time breakdown (run_benchmarks/results/breakdown/step.py), from the workers' records
(training/torch/breakdown_pp.py says how they were timed).

Measured, per step:
  pipeline_wait_s  the slowest stage's waiting in the schedule: the P2P transfers and the bubble together (the
                   wire cannot tell them apart without changing the schedule). The slowest stage's is the
                   pipeline's own (filling and draining); a faster stage waits that much plus the imbalance,
                   which the per-rank rows show, and the slowest stage is named like a straggler
  waiting_fraction pipeline_wait_s / (compute_s + pipeline_wait_s) of that stage: the basis of the bubble
                   formulas below (the ideal bubble, without transfer time)

Expected, for p pipeline ranks, m micro-batches per step and v stages per rank, with equal stages and no
transfer time (the schedules' own papers' bubble):
  GPipe, 1F1B       bubble fraction (p-1)/(m+p-1) of compute + bubble
  interleaved 1F1B  bubble fraction (p-1)/(v*m+p-1) (Megatron-LM's: the bubble shrinks v times)
  bubble_s          the expected compute x (p-1)/(v*m): the bubble of a step whose stages compute at the GEMM peak
  P2P               per stage boundary and micro-batch one activation forward and one gradient backward, each
                    micro_batch_size x seq_len x d_model x the activation's bytes: 2 x m x (stages-1) sends per
                    step, the workers' own count (each rank counts its sends and their bytes)
  p2p_s             the slowest stage's sends priced at the stored ``sendrecv`` micro case (nccl-tests'
                    sendrecv_perf, busbw = algbw) of 2 ranks (a send is between two) on the same hosts, at the
                    message size nearest its per-send size (its bytes / its sends: the records carry a count and a
                    sum, and a pipeline's sends are all one activation's size): time = sum over its sends of
                    send bytes / busbw = its bytes per step / busbw. An upper bound on what the transfers add to
                    its waiting: the schedule overlaps sends with compute. None, with the command that measures
                    it in ``missing``, where no such case is stored
"""
from __future__ import annotations

from typing import Optional, Sequence

from training.contract import perflog

FORMULAS = {"gpipe": "(p-1)/(m+p-1)", "1f1b": "(p-1)/(m+p-1)", "interleaved": "(p-1)/(v*m+p-1)"}
P2P_FORMULA = ("2 x m x (stages-1) sends per step (per stage boundary and micro-batch an activation forward and a "
               "gradient backward), each micro_batch_size x seq_len x d_model x the activation's bytes")
P2P_PRICE = ("time = the slowest stage's sends x its bytes per send / busbw(sendrecv, 2 ranks, at the nearest size) "
             "= its bytes per step / busbw (nccl-tests' sendrecv: busbw = algbw); an upper bound, the schedule "
             "overlaps sends with compute")
P2P_MISSING = ("no sendrecv busbw stored for 2 ranks on these hosts: run `{command}`; until then the pipeline's P2P "
               "transfers ({sends} sends, {nbytes:,} bytes per step on the slowest stage) are not priced")


def bubble_fraction(schedule: str, p: int, m: int, v: int = 1) -> float:
    """The schedule's ideal bubble as a fraction of a stage's compute + bubble (the module docstring's formulas)."""
    if schedule not in FORMULAS:
        raise ValueError(f"no bubble formula for pipeline schedule {schedule!r}")
    return (p - 1) / ((v if schedule == "interleaved" else 1) * m + p - 1)


def rank_row(record: perflog.BreakdownRecord, step: int) -> dict:
    """A rank's pipeline columns for ``per_rank`` at breakdown step ``step`` (its median step, whose other
    phases ``per_rank`` holds); none without a pipeline."""
    if record.pipeline is None:
        return {}
    return {"pipeline_wait_s": record.pipeline_wait_s[step], "stages": record.pipeline.get("stage_ids"),
            "sends": int(record.pipeline.get("sends", 0)), "send_bytes": int(record.pipeline.get("send_bytes", 0))}


def measured(records: Sequence[perflog.BreakdownRecord], slowest: dict) -> dict:
    """The measured part's pipeline fields; ``slowest``: the per-rank row of the slowest stage's rank."""
    if records[0].pipeline is None:
        return {}
    facts = records[0].pipeline
    wait = slowest["pipeline_wait_s"]
    busy = slowest["compute_s"] + wait
    sends = sum(int((r.pipeline or {}).get("sends", 0)) for r in records)
    nbytes = sum(int((r.pipeline or {}).get("send_bytes", 0)) for r in records)
    return {"pipeline_wait_s": wait, "waiting_fraction": wait / busy if busy > 0 else None,
            "pipeline": {key: facts.get(key) for key in ("schedule", "ranks", "stages", "stages_per_rank",
                                                         "micro_batches")} | {"sends": sends, "send_bytes": nbytes}
            | {"slowest_rank": slowest["rank"], "slowest_sends": slowest["sends"],
               "slowest_send_bytes": slowest["send_bytes"]}}


def send_size(part: dict) -> Optional[int]:
    """The slowest stage's bytes per send (its bytes / its sends), the message size its sendrecv busbw is read at;
    None where it sent nothing."""
    facts = part["pipeline"]
    return facts["slowest_send_bytes"] // facts["slowest_sends"] if facts["slowest_sends"] else None


def expected(part: dict, compute_s: Optional[float], busbw=None, command: str = "") -> dict:
    """The expected part's pipeline fields, from the measured part's schedule facts and the expected compute;
    ``busbw``: the stored sendrecv figure (step.BusBw: 2 ranks, these hosts) nearest ``send_size``, or None;
    ``command``: what stores one, named where it is missing."""
    facts = part["pipeline"]
    schedule, p, m, v = facts["schedule"], facts["ranks"], facts["micro_batches"], facts["stages_per_rank"] or 1
    fraction = bubble_fraction(schedule, p, m, v)
    sends, nbytes = facts["slowest_sends"], facts["slowest_send_bytes"]
    out = {"bubble_fraction": fraction, "bubble_formula": f"{schedule}: {FORMULAS[schedule]} with p={p}, m={m}"
           + (f", v={v}" if schedule == "interleaved" else ""),
           "bubble_s": None if compute_s is None else compute_s * (p - 1) / (v * m),
           "p2p_formula": P2P_FORMULA, "p2p_sends": facts["sends"], "p2p_bytes": facts["send_bytes"],
           "p2p_price_formula": P2P_PRICE, "p2p_rank": facts["slowest_rank"], "p2p_rank_sends": sends,
           "p2p_rank_bytes": nbytes, "p2p_s": None, "p2p_missing": None}
    if not sends:
        out["p2p_s"] = 0.0  # the slowest stage sent nothing: no transfer of its own to wait on
    elif busbw is None:
        out["p2p_missing"] = P2P_MISSING.format(command=command, sends=sends, nbytes=nbytes)
    else:
        out["p2p_s"] = nbytes / (busbw.gbps * 1e9)  # every send at the one busbw: the sum of bytes / busbw
        out["p2p_busbw"] = {"op": "sendrecv", "send_bytes": send_size(part), "ranks": busbw.ranks,
                            "busbw_gbps": busbw.gbps, "measured_at_bytes": busbw.nbytes, "source": busbw.source}
    return out

"""PPO's time breakdown in the orchestrator (run_benchmarks/results/breakdown/ppo.py), from canned breakdown
records: each phase read as a step is, the whole update as each rank's phases added, the expected compute per
phase its FLOPs over the stored peak exactly, the lines ``show`` prints, the lever, compare; and the records'
``phase`` checked like every field, older records read as whole steps. In-process."""
from __future__ import annotations

import json
import math

import pytest

from run_benchmarks.results.breakdown import step as breakdown, ppo as breakdown_ppo
from run_benchmarks.results.breakdown import words
from training.contract import flops, perflog
from training.contract.spec import WorkloadSpec

from .test_time_breakdown import MEASURE, allreduce_row

WORKLOAD = WorkloadSpec.model_validate({
    "task": "ppo", "model": dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=32),
    "train": dict(micro_batch_size=2, steps=4, warmup_steps=2),
    "ppo": dict(experience_batch_size=2, num_episodes=2, max_timesteps=4, update_timesteps=2, max_epochs=3,
                prompt_length=8, generation_length=4)})
PARTS = {"experience": ("generation", "scoring"), "learning": ("actor", "critic")}
LEARNING_BUCKETS = (4_000_000, 1_000_000)  # the actor's, then the critic's all-reduce
PEAK, SHEET = (10.0, "calibrated"), (20.0, "datasheet")
NODES = [{"node_rank": 0, "environment": {"hostname": "h"}}]  # the hosts allreduce_row's busbw was measured on


def phase(rank: int, name: str, compute: float, comm: float = 0.0, wait: float = 0.0, steps: int = 3):
    data, optimizer = 0.002, (0.003 if name == "learning" else 0.0)
    buckets = LEARNING_BUCKETS if name == "learning" else ()
    first, second = PARTS[name]
    return perflog.BreakdownRecord(
        rank=rank, steps=steps, phase=name, data_s=[data] * steps, compute_s=[compute] * steps, wait_s=[wait] * steps,
        communication_s=[comm] * steps, optimizer_s=[optimizer] * steps,
        step_s=[data + compute + wait + comm + optimizer] * steps, bucket_bytes=list(buckets), group_size=2,
        collective_ops=["allreduce"] * len(buckets), method="m",
        compute_parts={first: [0.75 * compute] * steps, second: [0.25 * compute] * steps})


def records() -> list:
    """Rank 1 is slow in experience making (a straggler there); learning is even."""
    return [phase(0, "experience", 0.6, wait=0.3), phase(1, "experience", 0.9),
            phase(0, "learning", 0.2, comm=0.05), phase(1, "learning", 0.2, comm=0.05)]


METRICS = {"step_time_s": {"median": 1.5, "mean": 1.5}, "tflops_per_device": 0.001, "measured_steps": 2}
FIGURES = {"experience.time_s": 2.0, "learning.time_s": 0.6}  # seconds of the measured updates, per rank


def tb(recs=None, peak=PEAK) -> dict:
    return breakdown_ppo.time_breakdown(records() if recs is None else recs, METRICS, WORKLOAD, FIGURES, peak, SHEET,
                                        NODES, [allreduce_row()], MEASURE)


def test_expected_compute_per_phase_is_the_phases_flops_over_the_stored_peak_exactly():
    ppo = WORKLOAD.ppo
    per_sample = flops.ppo_phase_flops(WORKLOAD.model, ppo.critic_model(WORKLOAD.model), ppo.prompt_length,
                                       ppo.generation_length, WORKLOAD.train)
    made = ppo.update_timesteps * ppo.experience_batch_size  # per device and update
    generation, scoring = made * per_sample["generation"].total, made * per_sample["forwards"].total
    learning = made * ppo.max_epochs * per_sample["learning"].total
    out = tb()
    experience, learned = out["phases"]["experience"]["expected"], out["phases"]["learning"]["expected"]
    assert experience["compute_s"] == (generation + scoring) / (10.0 * 1e12)
    assert experience["compute_s_datasheet"] == (generation + scoring) / (20.0 * 1e12)
    assert experience["compute_parts"] == {"generation": generation / 10e12, "scoring": scoring / 10e12}
    assert learned["compute_s"] == learning / (10.0 * 1e12) and learned["flops_per_device_step"] == learning
    assert out["expected"]["compute_s"] == (generation + scoring + learning) / (10.0 * 1e12)  # the whole update
    # the collectives priced as pretraining's: learning's buckets at the stored busbw; experience has none
    priced = math.fsum([(4_000_000) * 2 * 1 / 2 / 4e9, (1_000_000) * 2 * 1 / 2 / 2e9])
    assert learned["communication_s"] == priced == out["expected"]["communication_s"]
    assert experience["communication_s"] == 0.0 and experience["communication_note"] == "no collective in it"


def test_each_phase_is_read_as_a_step_and_the_update_as_each_ranks_phases_added():
    out = tb()
    experience, learning, whole = (out["phases"]["experience"]["measured"], out["phases"]["learning"]["measured"],
                                   out["measured"])
    assert experience["compute_s"] == 0.9 and experience["straggler"]["rank"] == 1  # the slowest rank's
    assert experience["compute_parts"] == {"generation": pytest.approx(0.675), "scoring": pytest.approx(0.225)}
    assert experience["step_time_s"] == pytest.approx(1.0)  # 2 s over 2 measured updates: the phase's mean
    assert learning["communication_s"] == 0.05 and learning["straggler"] is None
    assert learning["bucket_bytes"] == list(LEARNING_BUCKETS)
    # the whole: per rank experience + learning, step by step; then the slowest rank, as for a step
    assert whole["compute_s"] == pytest.approx(1.1) and whole["communication_s"] == pytest.approx(0.05)
    assert whole["serialised_step_s"] == pytest.approx(experience["serialised_step_s"] + learning["serialised_step_s"])
    assert whole["step_time_s"] == 1.5 and whole["collective_ops"] == ["allreduce", "allreduce"]
    assert [r["rank"] for r in whole["per_rank"]] == [0, 1] and whole["per_rank"][0]["wait_s"] == pytest.approx(0.3)
    assert out["unit"] == "update" and [p["label"] for p in out["phases"].values()] == ["experience making",
                                                                                          "learning"]


def test_the_whole_updates_parts_are_its_phases_parts_added_so_they_add_up():
    """Each rank's phases summed step by step and read at its median update put the whole's communication at the
    update whose learning all-reduce was fast (50 ms) while learning's own median update read 200 ms: the whole
    update read less communication than one of its phases (126 ms against 209 ms in a real run)."""
    def uneven(rank: int) -> list:
        experience = phase(rank, "experience", 0.1)
        learning = phase(rank, "learning", 0.1)
        fields = dict(compute_s=[0.1, 0.5, 0.3], step_s=[0.102, 0.502, 0.302],
                      compute_parts={"generation": [0.075, 0.375, 0.225], "scoring": [0.025, 0.125, 0.075]})
        comm = [0.2, 0.2, 0.05]
        learned = dict(communication_s=comm, step_s=[0.002 + 0.1 + c + 0.003 for c in comm])
        return [perflog.BreakdownRecord(**{**experience.__dict__, **fields}),
                perflog.BreakdownRecord(**{**learning.__dict__, **learned})]

    out = tb(uneven(0) + uneven(1))
    whole, parts = out["measured"], [p["measured"] for p in out["phases"].values()]
    assert parts[1]["communication_s"] == 0.2 and whole["communication_s"] == pytest.approx(0.2)  # read alone: 0.05
    for key in ("compute_s", "communication_s", "other_s", "serialised_step_s"):
        assert whole[key] == pytest.approx(math.fsum(part[key] for part in parts)), key
    assert whole["compute_s"] + whole["communication_s"] + whole["other_s"] == pytest.approx(whole["serialised_step_s"])
    assert breakdown.measured(breakdown_ppo._whole(uneven(0) + uneven(1)), 1.5)["communication_s"] == 0.05


def test_show_prints_each_phase_and_the_lever_names_the_phase_then_its_part():
    """The lever: the longer phase, then the part of it that loses the most against what is achievable (compute
    at half the calibrated peak); the other phase's communication, 50 ms against 1.5 ms at the stored busbw, is
    named too, with the time it would save."""
    out = tb()
    expected = out["phases"]["experience"]["expected"]
    assert out["lever"] == (
        "experience making is 78% of the serialised update (902 ms): compute is 100% of the phase (900 ms: "
        f"generation 675 ms, scoring 225 ms); at 50% of the calibrated GEMM peak it would take "
        f"{words.ms(expected['compute_s'] * 2)} (generation {words.ms(expected['compute_parts']['generation'] * 2)}, "
        f"scoring {words.ms(expected['compute_parts']['scoring'] * 2)}): 900 ms to gain; "
        + words.OVERHEAD_BOUND.format(ratio=681_323) + "; rank 1 is a straggler (compute 900 ms against the median "
        "750 ms: 20% above it, past the 10% margin); in learning, communication is 20% of the phase (50 ms); the 2 "
        "allreduce of 5 MB ran at 3% of the bus bandwidth these hosts measured (1.5 ms at it): 48.5 ms would be "
        "saved")
    lines = words.describe(out)
    assert lines[0] == ("time breakdown per update, measured on 3 serialised updates after the measured ones: compute "
                        "1.1 s, communication 50 ms (2 allreduce, 5,000,000 bytes), other 7 ms; serialised update "
                        "1.16 s against the measured updates' median 1.5 s")
    experience = lines.index(next(line for line in lines if line.startswith("  experience making: ")))
    assert lines[experience] == ("  experience making: 78% of the serialised update, compute 900 ms (generation "
                                 "675 ms, scoring 225 ms), communication 0 ms (no collective, 0 bytes), other 2 ms; "
                                 "serialised 902 ms against the measured updates' mean 1 s")
    assert lines[experience + 1].startswith("    expected: compute ") and "(generation " in lines[experience + 1]
    assert lines[experience + 2] == ("    rank 0: compute 600 ms (generation 450 ms, scoring 150 ms), wait 300 ms, "
                                     "communication 0 ms, data 2 ms, optimizer 0 ms")
    assert any(line.startswith("  learning: 22% of the serialised update, compute 200 ms (actor 150 ms, critic "
                               "50 ms), communication 50 ms (2 allreduce, 5,000,000 bytes)") for line in lines)
    assert not any(line.startswith("  rank ") for line in lines)  # the ranks are shown per phase
    assert lines[-1] == f"  biggest lever: {out['lever']}"


def test_compare_names_the_part_and_each_phase():
    slower = [phase(0, "experience", 0.6, wait=0.3), phase(1, "experience", 0.9),
              phase(0, "learning", 0.2, comm=0.25), phase(1, "learning", 0.2, comm=0.25)]
    line = words.changed_part(tb(), tb(slower))
    assert line.startswith("the update's communication changed most: 50 ms -> 250 ms (+200 ms;")
    assert line.endswith("; by phase: experience making 902 ms -> 902 ms, learning 255 ms -> 455 ms")


def test_without_records_or_breakdown_updates_it_says_why_and_prices_no_communication():
    zero = [perflog.BreakdownRecord(rank=r, steps=0, phase=p, not_measured="train.breakdown_steps is 0")
            for r in (0, 1) for p in ("experience", "learning")]
    out = tb(zero)
    assert out["measured"] == {"not_measured": "train.breakdown_steps is 0"} and out["lever"] is None
    assert out["phases"]["learning"]["measured"] == {"not_measured": "train.breakdown_steps is 0"}
    assert out["expected"]["communication_s"] is None and words.describe(out)[0] == \
        "time breakdown: train.breakdown_steps is 0"
    lacking = records()[:3] + [perflog.BreakdownRecord(rank=-1, steps=0, not_measured="not measured for ppo (a "
                                                                                      "rank reported no breakdown)")]
    out = tb(lacking)
    assert out["measured"]["not_measured"] == "not measured for ppo (a rank reported no breakdown)"
    assert out["phases"]["learning"]["measured"]["not_measured"].startswith("not measured for ppo")
    assert tb(records()[:3])["measured"]["not_measured"].startswith("not measured: a rank reported only some")
    assert tb(peak=(None, "run `accelbench calibrate cpu`"))["expected"]["missing"][0] == \
        "run `accelbench calibrate cpu`"


def _payload(record) -> dict:
    return json.loads(perflog.format_record(record)[len(perflog.PREFIX):])


@pytest.mark.parametrize("bad, message", [
    (dict(phase="generation"), "phase must be one of"),
    (dict(compute_parts={"actor": [0.1]}), r"compute_parts\['actor'\] must hold 3 finite numbers"),
    (dict(compute_parts={"actor": [0.1, float("nan"), 0.1]}), "must hold 3 finite numbers"),
    (dict(compute_parts=[0.1]), "compute_parts must be an object"),
])
def test_a_bad_phase_or_part_is_refused_and_an_older_record_reads_as_a_whole_step(bad, message):
    good = phase(0, "learning", 0.2)
    assert perflog.from_payload(_payload(good)) == good
    with pytest.raises(perflog.PerfLogError, match=message):
        perflog.from_payload({**_payload(good), **bad})
    older = {k: v for k, v in _payload(good).items() if k not in ("phase", "compute_parts")}
    read = perflog.from_payload({**older, "v": 4})  # version 4: no phase, no parts
    assert read.phase is None and read.compute_parts == {} and read.compute_s == good.compute_s


def test_a_ppo_rounds_logs_give_the_per_phase_breakdown_and_show_prints_it(root, tmp_path, accelbench):
    """Breakdown records in the ranks' logs (two per rank) -> the round's metrics.time_breakdown -> the store ->
    ``show``."""
    from run_benchmarks.execute import outcome
    from run_benchmarks.results.figures import analyze

    from run_benchmarks.results.worker_logs import rank_logs as collect
    from .test_outcomes import _rank_log
    from .test_plan import build
    from .test_results import document, fill

    (case,) = build(root, tmp_path, "ppo_tiny:torch:cpu:1:2").cases
    (rnd,) = case.rounds
    rnd.nodes[0].log_dir.mkdir(parents=True)
    ranks = []
    for rank in (0, 1):
        logs = _rank_log(rnd.nodes[0].log_dir, rank, range(1, 3))
        with open(logs.stdout, "a") as f:
            for record in records()[rank::2]:
                f.write(perflog.format_record(record) + "\n")
        ranks.append(collect.read_rank(logs))
    assert [len(r.breakdowns) for r in ranks] == [2, 2]
    accumulated = analyze.RoundAccumulator()
    for rank in ranks:
        accumulated.add(rank)
    result = outcome.RoundResult(str(case.name), rnd.index, rnd.dir, status="failed")
    outcome.classify(case, rnd, result, "done", ranks, accumulated)
    result.figures = [{"name": "experience.time_s", "value": 0.4, "params": None},
                      {"name": "learning.time_s", "value": 0.1, "params": None}]
    out = outcome._time_breakdown(case, ranks, result, [])
    assert out["phases"]["experience"]["measured"]["straggler"]["rank"] == 1
    assert out["phases"]["experience"]["measured"]["step_time_s"] == pytest.approx(0.4 / 2)  # 2 measured updates
    assert out["lever"].startswith("experience making is 78% of the serialised update (902 ms): compute is 100%")

    doc = document("r1", "ppo_tiny", "torch", 0.1, world=2)
    doc["metrics"]["time_breakdown"] = out
    db = tmp_path / "results.db"
    fill(db, [doc])
    shown = accelbench("show", "r1", "--db", str(db)).stdout
    assert "time breakdown per update, measured on 3 serialised updates after the measured ones" in shown
    assert "experience making: 78% of the serialised update, compute 900 ms (generation 675 ms" in shown
    assert "rank 1: compute 900 ms (generation 675 ms, scoring 225 ms), wait 0 ms" in shown
    assert "learning: 22% of the serialised update" in shown and "biggest lever: experience making is 78%" in shown


def test_the_ppo_phase_summary_notes_each_phases_breakdown():
    from run_benchmarks.results.report.ppo_phases import breakdown_note

    (note,) = breakdown_note(tb())
    assert note == ("time breakdown per update (3 serialised updates after the measured ones, first ok round): make "
                    "experience 902 ms: compute 900 ms, communication 0 ms, other 2 ms; learn 255 ms: compute 200 ms, "
                    "communication 50 ms, other 5 ms")
    assert breakdown_note(None) == [] and breakdown_note(tb([])) == []

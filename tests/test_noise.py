"""Every figure with its noise (issue 41): a round's own steps resampled give its rate's interval, stored with the
round; compare states the interval of every change, one round against one included, and calls it within noise,
a regression or an improvement; a contended pair is never judged. Rounds are analysed from perf records as a run
analyses them (figures/analyze.py) and stored as a run stores them."""
from __future__ import annotations

import math
import random

import pytest

from run_benchmarks.results.figures import analyze, noise
from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.report.compare import Selection, compare, format_change
from run_benchmarks.results.store.store import ResultStore
from training.contract.perflog import EndRecord, StartRecord, StepRecord

from .test_results import document, fill

TOKENS = 4096


def metrics(step_times: list[float], warmup: int = 2) -> dict:
    """One rank's round: ``warmup`` steps of 1 s, then ``step_times``."""
    log = collect.RankLog(0, start=StartRecord(
        rank=0, local_rank=0, node_rank=0, world_size=1, framework="torch", framework_version="2.13.0", device="cpu",
        precision="bf16", n_params=10, flops_per_token=6e6, flop_formula="6N", tokens_per_step=TOKENS),
        end=EndRecord(rank=0, steps=warmup + len(step_times), peak_memory_bytes=2**20, memory_total_bytes=2**34,
                      memory_kind="rss"))
    for step, seconds in enumerate([1.0] * warmup + step_times):
        log.series.add_record(StepRecord(rank=0, step=step, warmup=step < warmup, step_time_s=seconds, tokens=TOKENS,
                                         loss=5.0 - step * 0.01))
    return analyze.round_metrics([log], 100.0, "", samples_per_step=8).to_dict()


def steps(n: int, mean: float, cv: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [max(1e-3, rng.gauss(mean, mean * cv)) for _ in range(n)]


def stored(db, run_id: str, step_times: list[float], round_: int = 1, contended: bool = False) -> None:
    doc = document(run_id, "gpt2_tiny", "torch", 0.1, round_=round_, world=1)
    doc["metrics"] = metrics(step_times)
    if contended:
        doc["monitor"] = {"contention": {"verdict": "contended", "nodes": [],
                                         "reasons": ["others used 63% of the run's 2 core(s) (limit 25%)"]}}
    fill(db, [doc])


def rows(db, a: str, b: str):
    with ResultStore(db) as store:
        return compare(Selection(a, (a,), {}), Selection(b, (b,), {}), store.attempts(run_ids=[a]),
                       store.attempts(run_ids=[b]))


def test_a_round_stores_its_rates_interval_from_its_steps():
    times = steps(40, 0.1, 0.1, seed=1)
    found = metrics(times)["rate_noise"]
    assert found == metrics(times)["rate_noise"]  # seeded: the same steps, the same interval
    low, high = found["interval95"]
    assert low < 0 < high and found["steps"] == 40 and found["block_steps"] == 1
    assert found["step_time_cv"] == pytest.approx(analyze.Stats.of(times).cv)
    # the spread of a mean of 40 steps with a 10 % spread: about 10 % / sqrt(40) = 1.6 % either way
    assert 0.01 < high < 0.03 and -0.03 < low < -0.01 and found["log_se"] == pytest.approx(0.1 / math.sqrt(40), rel=0.3)
    assert metrics([0.1] * 10)["rate_noise"]["interval95"] == [0.0, 0.0]  # steps alike: no spread to show
    assert metrics([0.1])["rate_noise"]["interval95"] is None  # one step: its spread is unknown, and said why
    long = noise.round_noise(steps(1000, 0.1, 0.1, seed=2), [TOKENS] * 1000)
    assert long["block_steps"] == 10 and long["blocks"] == 100  # n^(1/3) steps a block: drifts stay inside them


def test_the_interval_covers_the_true_rate_about_95_percent_of_the_time():
    """Rounds of 30 independent steps around a known mean step time: the interval holds the true rate in about
    95 of 100 rounds (a percentile bootstrap of a small sample runs a little under its nominal level)."""
    true_rate, held = TOKENS / 0.1, 0
    for seed in range(200):
        times = steps(30, 0.1, 0.2, seed=seed)
        rate = TOKENS * len(times) / math.fsum(times)
        low, high = noise.round_noise(times, [TOKENS] * len(times))["interval95"]
        held += rate * (1 + low) <= true_rate <= rate * (1 + high)
    assert 0.88 <= held / 200 <= 0.99, held


def test_compare_states_the_interval_of_one_round_against_one(tmp_path):
    db = tmp_path / "results.db"
    stored(db, "a", steps(30, 0.100, 0.05, seed=3))
    stored(db, "same", steps(30, 0.101, 0.05, seed=4))
    stored(db, "slow", steps(30, 0.130, 0.05, seed=5))
    same, = [r for r in rows(db, "a", "same") if r.a and r.b]
    low, high = same.interval("tokens_per_s_per_device")
    assert low < 0 < high and format_change(same, "tokens_per_s_per_device").endswith("(within noise)")
    se = [metrics(steps(30, m, 0.05, seed=s))["rate_noise"]["log_se"] for m, s in ((0.100, 3), (0.101, 4))]
    assert high - low == pytest.approx(2 * 1.96 * math.hypot(*se), rel=0.05)  # B/A - 1: normal on the log scale
    slow, = [r for r in rows(db, "a", "slow") if r.a and r.b]
    text = format_change(slow, "tokens_per_s_per_device")
    assert text.startswith("-23% [") and text.endswith("(regression)")  # 1/1.3 - 1: a slowdown, beyond the noise
    # a median step time or a memory figure of one round has no noise its steps' resampling gives: not judged
    assert slow.interval("step_time_median_s") is None and slow.verdict("memory") is None


def test_several_rounds_use_their_spread_between_rounds_when_it_is_larger():
    """Two rounds whose steps were steady but whose rates differ by 10 %: the between-round spread sets the noise."""
    values, ses = [1000.0, 1100.0], [0.001, 0.001]
    between = abs(math.log(1100 / 1000)) / math.sqrt(2) / math.sqrt(2)  # sd of two logs / sqrt(2)
    assert noise.side_log_se("tokens_per_s_per_device", values, ses) == pytest.approx(between)
    assert noise.side_log_se("tokens_per_s_per_device", [1000.0], [0.02]) == pytest.approx(0.02)
    assert noise.side_log_se("peak_memory_bytes", [1000.0], [0.02]) is None  # no rate: the steps say nothing
    assert noise.verdict((-0.01, 0.02), True) == "within noise" and noise.verdict((0.01, 0.02), False) == "regression"


def test_a_pair_with_a_contended_round_is_never_judged(tmp_path, accelbench):
    db = tmp_path / "results.db"
    stored(db, "quiet", steps(30, 0.100, 0.05, seed=6))
    stored(db, "busy", steps(30, 0.600, 0.05, seed=7), contended=True)
    row, = [r for r in rows(db, "quiet", "busy") if r.a and r.b]
    assert row.contended == ["B round 1: others used 63% of the run's 2 core(s) (limit 25%)"]
    assert row.verdict("tokens_per_s_per_device") == "not judged: contended" and row.within_noise("mfu") is None
    done = accelbench("compare", "quiet", "busy", "--db", str(db))
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "not judged: gpt2_tiny torch cpu 1x1: B round 1: others used 63% of the run's 2 core(s) (limit 25%)" in out
    assert not any(word in out for word in ("(regression)", "(improvement)", "(within noise)"))
    md = accelbench("compare", "quiet", "busy", "--db", str(db), "--format", "markdown").stdout
    assert "Contended (not judged):" in md and "not judged: contended" in md

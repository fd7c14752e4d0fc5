"""Property tests of ``--format mllog``: a generator writes MLPerf logs of each structure the benchmark table
(mlperf_benchmarks.yaml) reads, with random intervals, durations, warm-up, evaluations inside and between
intervals, intervals after run_stop and the key variants real submissions use; the importer's figures must be
the generator's truth (what it trained, over the training time it wrote). Logs are built here, never read from
real files.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from run_benchmarks.results.importers.parsers import get

T0 = 1_760_000_000_000
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass
class Truth:
    amounts: list[float] = field(default_factory=list)  # per interval, samples (tokens for a tokens benchmark)
    seconds: list[float] = field(default_factory=list)
    seq: int = 0  # tokens per sample: 0 where the benchmark has no tokens
    tokens: bool = False  # the intervals count tokens
    scores: dict = field(default_factory=dict)
    start: int = 0
    stop: int = 0

    def rate(self, skip: int) -> float:
        first = skip if len(self.amounts) > skip else 0
        return math.fsum(self.amounts[first:]) / math.fsum(self.seconds[first:])


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, key: str, at_ms: int, value=None, **metadata) -> None:
        event = {"namespace": "", "time_ms": T0 + at_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
                 "metadata": {"file": "train.py", "lineno": 1, **metadata}}
        self.lines.append(f":::MLLOG {json.dumps(event)}\n")

    @property
    def text(self) -> str:
        return "".join(self.lines)


def evaluation(w: Writer, t: int, duration: int, accuracy: float, metrics=(None,), **position) -> int:
    w("eval_start", t, **position)
    for name in metrics:
        w("eval_accuracy", t + duration, accuracy, **position, **({"metric": name} if name else {}))
    w("eval_stop", t + duration, **position)
    return t + duration


@st.composite
def samples_count_logs(draw):
    """Blocks counted by samples_count (Llama, Stable Diffusion, Flux): a block_stop that states its end,
    repeats its start (NeMo) or states none; evaluations between blocks or timed inside them."""
    name = draw(st.sampled_from(["llama2_70b_lora", "llama31_8b", "llama31_405b", "flux1", "stable_diffusion"]))
    stop_style = draw(st.sampled_from(["own", "repeat", "none"]))
    batch, seq = draw(st.sampled_from([8, 32, 1152])), 8192
    w, truth = Writer(), Truth(seq=seq if name.startswith("llama31") else 0)
    metrics = ("FID", "CLIP") if name == "stable_diffusion" else (None,)
    w("submission_benchmark", 0, name), w("global_batch_size", 0, batch)
    if truth.seq:
        w("max_sequence_length", 0, seq)
    w("run_start", 1000)
    t, count = 1000, 0
    for k in range(draw(st.integers(1, 6))):
        steps, ms = draw(st.integers(1, 40)), draw(st.integers(5_000, 900_000))
        inside = draw(st.booleans()) and stop_style == "own"
        w("block_start", t, samples_count=count)
        eval_ms = draw(st.integers(100, 20_000)) if inside else 0
        if inside:  # an evaluation timed inside the block, at the count so far: left out of its time
            evaluation(w, t + ms // 2, eval_ms, 0.5, metrics, samples_count=count)
        end = count + steps * batch
        w("block_stop", t + ms + eval_ms, **({"samples_count": end} if stop_style == "own" else
                                           {"samples_count": count} if stop_style == "repeat" else {}))
        truth.amounts.append(end - count), truth.seconds.append(ms / 1000)
        t, count = evaluation(w, t + ms + eval_ms, draw(st.integers(100, 30_000)), 0.9 - 0.01 * k, metrics,
                              samples_count=end), end
        truth.scores = {m or "any": 0.9 - 0.01 * k for m in metrics}
    truth.start, truth.stop = 1000, t
    w("run_stop", t, status="success", samples_count=count)
    if draw(st.booleans()):  # a block logged after run_stop (Stable Diffusion): no training of the run
        w("block_start", t + 5, samples_count=count), w("block_stop", t + 90_000, samples_count=count + batch)
    return w.text, truth


@st.composite
def gpt3_logs(draw):
    """GPT-3: blocks of epoch_count tokens at first_epoch_num, evaluations at epoch_num tokens, the tokens trained
    in train_samples after run_stop."""
    batch, seq, per_block = draw(st.sampled_from([1536, 2048, 2304])), 2048, draw(st.integers(1, 16))
    size = batch * seq * per_block
    w, truth = Writer(), Truth(seq=seq, tokens=True)
    w("submission_benchmark", 0, "gpt3"), w("global_batch_size", 0, batch), w("max_sequence_length", 0, seq)
    w("run_start", 0)
    t, position = 0, 0
    for k in range(draw(st.integers(1, 6))):
        ms = draw(st.integers(10_000, 400_000))
        w("block_start", t, first_epoch_num=position, epoch_count=size)
        w("block_stop", t + ms, first_epoch_num=position, epoch_count=size)
        truth.amounts.append(size), truth.seconds.append(ms / 1000)
        position += size
        t = evaluation(w, t + ms, draw(st.integers(1_000, 20_000)), 2.8 - 0.01 * k, epoch_num=position)
        truth.scores = {"any": 2.8 - 0.01 * k}
    truth.stop = t
    w("run_stop", t, status="success"), w("train_samples", t, position)
    return w.text, truth


@st.composite
def fraction_logs(draw):
    """R-GAT and DLRM: one epoch, evaluations at fractions of it, run_stop inside it at the last one's fraction;
    train_samples the samples of an epoch; the epoch's own epoch_num an index (1 in Dell's R-GAT)."""
    name = draw(st.sampled_from(["rgat", "gnn", "dlrm_dcnv2"]))
    per_epoch = 4195197692 if name == "dlrm_dcnv2" else draw(st.integers(10_000, 200_000_000))
    w, truth = Writer(), Truth()
    w("submission_benchmark", 0, name), w("run_start", 0), w("train_samples", 10, per_epoch)
    w("epoch_start", 1000, epoch_num=draw(st.sampled_from([0, 1])))
    t, evals, fraction, evals_s = 1000, draw(st.integers(1, 18)), 0.0, 0.0
    for k in range(evals):
        t += draw(st.integers(1_000, 60_000))
        fraction = round((k + 1) * 0.05, 2)
        eval_ms = draw(st.integers(10, 3_000))
        t = evaluation(w, t, eval_ms, 0.70 + 0.001 * k, epoch_num=fraction)
        evals_s += eval_ms / 1000
        truth.scores = {"any": 0.70 + 0.001 * k}
    w("run_stop", t, status="success", epoch_num=fraction), w("epoch_stop", t, epoch_num=fraction)
    truth.amounts, truth.seconds, truth.stop = [fraction * per_epoch], [(t - 1000) / 1000 - evals_s], t
    return w.text, truth


@st.composite
def retinanet_logs(draw):
    """RetinaNet: whole epochs of train_samples batches x global_batch_size, the last cut by run_stop (left out),
    tracked_stats' throughput per device (never kept: not the blocks' figure)."""
    batch, devices = draw(st.sampled_from([128, 256, 512])), 8
    iterations = math.ceil(1170301 / batch)
    w, truth = Writer(), Truth()
    w("submission_benchmark", 0, draw(st.sampled_from(["ssd", "retinanet"]))), w("global_batch_size", 0, batch)
    w("run_start", 0), w("train_samples", 1, iterations)
    t = 1
    for k in range(draw(st.integers(1, 5))):
        ms = draw(st.integers(100_000, 700_000))
        w("epoch_start", t, k, epoch_num=k), w("epoch_stop", t + ms, k, epoch_num=k)
        w("tracked_stats", t + ms, {"throughput": iterations * batch / (ms / 1000) / devices}, step=k + 1)
        truth.amounts.append(iterations * batch), truth.seconds.append(ms / 1000)
        t = evaluation(w, t + ms, draw(st.integers(1_000, 40_000)), 0.2 + 0.01 * k, epoch_num=k + 1)
        truth.scores = {"any": 0.2 + 0.01 * k}
    w("epoch_start", t, epoch_num=99)  # cut by run_stop: part of an epoch, left out
    truth.stop = t + draw(st.integers(1, 9_000))
    w("run_stop", truth.stop, status="success"), w("epoch_stop", truth.stop + 1, epoch_num=99)
    return w.text, truth


@st.composite
def bert_logs(draw):
    """BERT: epoch_num counts samples; one block whose own first_epoch_num/epoch_count (1, 1) is no position;
    train_samples after training (the total) or before it (a budget)."""
    batch, steps = draw(st.sampled_from([66, 4608])), draw(st.integers(10, 700))
    w, truth = Writer(), Truth()
    budget = draw(st.booleans())
    w("submission_benchmark", 0, "bert"), w("global_batch_size", 0, batch), w("run_start", 0)
    if budget:
        w("train_samples", 1, 3630000)
    w("epoch_start", 5, epoch_num=0), w("block_start", 5, first_epoch_num=1, epoch_count=1)
    t, evals_s, evals = 5, 0.0, draw(st.integers(1, 10))
    for k in range(evals):
        t += draw(st.integers(1_000, 90_000))
        eval_ms = draw(st.integers(10, 5_000))
        t = evaluation(w, t, eval_ms, 0.7 + 0.001 * k, epoch_num=steps * batch * (k + 1) // evals // batch * batch)
        evals_s += eval_ms / 1000
        truth.scores = {"any": 0.7 + 0.001 * k}
    end = steps * batch * evals // evals // batch * batch
    w("block_stop", t, first_epoch_num=1), w("epoch_stop", t, epoch_num=end)
    if not budget:
        w("train_samples", t, end)
    w("run_stop", t + 1, status="success")
    truth.amounts, truth.seconds, truth.stop = [end], [(t - 5) / 1000 - evals_s], t + 1
    return w.text, truth


def check(tmp_path: Path, text: str, truth: Truth, skip: int) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(text)
    result = get("mllog").parse(log, None, skip)
    assert result.status == "ok", (result.reason, result.warnings)
    m = result.metrics
    rate = truth.rate(skip)
    samples = rate / truth.seq if truth.tokens else rate
    assert m["samples_per_s"] == pytest.approx(samples, rel=1e-9), (m["sources"], result.warnings)
    tokens = rate if truth.tokens else rate * truth.seq if truth.seq else None
    assert m.get("tokens_per_s_total") == (pytest.approx(tokens, rel=1e-9) if tokens else None)
    assert m["time_to_train_s"] == pytest.approx((truth.stop - truth.start) / 1000, abs=1e-9)
    scored = m.get("eval_metrics") or {}
    if "any" in truth.scores:
        assert m["eval_accuracy"] == pytest.approx(truth.scores["any"])
    else:
        assert scored == pytest.approx(truth.scores)
    assert "samples_per_s_logged" not in m or m["samples_per_s_logged"] == pytest.approx(samples, rel=0.1)


FAMILIES = {  # each structure the benchmark table reads, by the generator that writes it
    "samples_count blocks (stating, repeating or lacking their end; a block after run_stop)": samples_count_logs(),
    "GPT-3 token blocks": gpt3_logs(),
    "a run that stops inside its only epoch (R-GAT, DLRM)": fraction_logs(),
    "RetinaNet's batch-counted epochs, the cut one left out": retinanet_logs(),
    "BERT's epoch_num samples, a budget or a total": bert_logs(),
}


@pytest.mark.parametrize("family", list(FAMILIES))
@SETTINGS
@given(data=st.data())
def test_the_importers_figures_are_the_generators_truth(tmp_path, family, data):
    text, truth = data.draw(FAMILIES[family])
    check(tmp_path, text, truth, data.draw(st.integers(0, 2)))

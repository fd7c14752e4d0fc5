"""Property tests of the line-log importers (issue 40): for every format, a generator (tests/line_logs.py,
tests/line_log_writers.py) writes logs of a known truth with random log intervals, lines left out (a log pasted
into an issue), ranks (prefixed and interleaved, unprefixed repeats, a rank that printed only its warm-up), warm-up,
interleaved evaluations and the format's field variants (Megatron-LM 2021 / Megatron-Core / its 2025 first-iteration
line, NeMo 1 / 2, torchtitan old / new, the PaddleNLP Trainer 2022 / today, PaddleFormers, ERNIEKit). The parser's
figures must equal the truth's: each line weighted by the steps it covers, from the lowest rank with lines after
its warm-up, the 2022 Trainer's samples/s named and left out.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from run_benchmarks.results.importers import parsers

from .line_log_writers import write
from .line_logs import GIB, Truth, flops_per_step_per_device

VARIANTS = {"megatron": ("lm", "core", "core2025"), "megatron-deepspeed": ("ds",), "nemo": ("nemo1", "nemo2"),
            "torchtitan": ("old", "new"), "paddlenlp": ("today", "2022"), "paddleformers": ("today",),
            "erniekit": ("today",)}
REL = 2e-3  # what the tools' printed rounding leaves (tokens/s as whole numbers, ms with one decimal, ...)


@st.composite
def truths(draw, fmt: str) -> Truth:
    variant = draw(st.sampled_from(VARIANTS[fmt]))
    # a first-step line and a log interval of 1 are one line: torchtitan and Megatron-Core 2025 log every step from 2
    interval = draw(st.integers(2 if variant in ("2022", "core2025") or fmt == "torchtitan" else 1, 20))
    points, skip = draw(st.integers(6, 14)), draw(st.integers(1, 2))
    pair = draw(st.integers(skip + 2, points - 1))  # two consecutive points after the warm-up: the interval shows
    kept = draw(st.lists(st.booleans(), min_size=points, max_size=points))
    shown = [k for k in range(1, points + 1) if kept[k - 1] or k <= skip or k in (pair, pair + 1)]
    world = draw(st.sampled_from([1, 2, 4, 8]))
    if fmt == "torchtitan":
        ranks = draw(st.sampled_from([[None], [0], [0, 1, 2, 3], [1, 3]]))
    elif fmt.startswith("megatron"):
        ranks = draw(st.sampled_from([[None], [world - 1]]))
    else:
        ranks = [None]
    digits = {"nemo1": 2, "nemo2": 3}.get(variant, 4)  # NeMo prints 3 or 4 significant digits
    step_time = st.floats(0.5, 5.0).map(lambda x: round(x, digits))
    tau = {rank: [draw(st.floats(8.0, 20.0))] + draw(st.lists(step_time, min_size=points, max_size=points))
           for rank in ranks}
    memory = {rank: draw(st.lists(st.floats(10.0, 70.0), min_size=points + 1, max_size=points + 1)) for rank in ranks}
    return Truth(fmt, variant, interval, points, shown, tau, batch=world * draw(st.integers(4, 16)),
                 seq=draw(st.sampled_from([2048, 4096, 8192])), world=world, ranks=ranks,
                 warm_only=ranks[0] if len(ranks) > 2 and draw(st.booleans()) else None,
                 evals=set(draw(st.lists(st.sampled_from(shown), max_size=3))), stated=draw(st.booleans()),
                 memory_gib=memory, repeats=draw(st.integers(1, 3)) if ranks == [None] and fmt == "torchtitan" else 1,
                 skip=skip)


def imported(tmp_path, truth: Truth):
    log = tmp_path / f"{truth.fmt}.log"
    log.write_text(write(truth))
    return parsers.get(truth.fmt).parse(log, truth.world, truth.skip)


def approx(value):
    return pytest.approx(value, rel=REL)


@pytest.mark.parametrize("fmt", list(VARIANTS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_figures_of_a_generated_log_are_its_truth(tmp_path, fmt, data):
    truth = data.draw(truths(fmt))
    result = imported(tmp_path, truth)
    want, m = truth.expected(), result.metrics
    assert result.status == "ok", (result.reason, truth)
    assert result.details["rank"] == want["rank"] and result.details["measured"] == want["lines"], (result.details, truth)
    assert result.details["validation_lines"] == len(truth.evals)  # read, counted, left out of training
    if fmt == "torchtitan":  # it prints tokens/s, and neither a step time nor a batch
        assert "step_time_s" not in m and "samples_per_s" not in m
        assert m["tokens_per_s_per_device"] == approx(want["tokens_per_s_per_device"])
        assert m["peak_memory_reserved_bytes"]["max"] == approx(want["memory_bytes"])
        assert m["memory_device_bytes_logged"] == approx(truth.device_gib * GIB)
        if truth.variant == "new":
            assert m["tflops_per_device_logged"] == approx(flops_per_step_per_device(truth) / 1e12 * want["steps_per_s"])
        return
    assert m["step_time_s"]["median"] == approx(want["step_median"])
    assert m["step_time_s"]["mean"] == approx(want["step_mean"])
    if truth.variant == "2022":  # one step's samples on one device over the whole interval: named, left out
        assert m.get("samples_per_s") is None and "interval_samples_per_second" in m["contradictions"]
        assert any("interval_samples_per_second contradicts" in w for w in result.warnings)
        return
    assert m["samples_per_s"] == approx(want["samples_per_s"])
    if truth.variant == "nemo2":  # NeMo 2's lines state no sequence length: tokens/s needs a case's
        assert m.get("tokens_per_s_per_device") is None and m.get("tokens_per_s_total") is None
    else:
        tokens = m.get("tokens_per_s_per_device") or m["tokens_per_s_total"] / truth.world
        assert tokens == approx(want["tokens_per_s_per_device"])
    assert "contradictions" not in m, m.get("contradictions")
    if want["memory_bytes"] is not None:
        assert m["peak_memory_reserved_bytes"]["max"] == approx(want["memory_bytes"])
    tool = {"megatron": 1.0, "nemo": 1.0, "megatron-deepspeed": 4 / 3}.get(fmt)
    if tool and "tflops_per_device_logged" in m:
        assert m["tflops_per_device_logged"] == approx(
            tool * flops_per_step_per_device(truth) / 1e12 * want["steps_per_s"])

"""Live progress of a round: rank 0's step records become step, tokens/s per device, loss and time left."""
from __future__ import annotations

import io

from rich.console import Console

from run_benchmarks.results.report.live import LiveProgress, LiveStep
from training.contract import perflog


def record(step: int, step_time_s: float = 0.5, warmup: bool = False) -> perflog.StepRecord:
    return perflog.StepRecord(rank=0, step=step, warmup=warmup, step_time_s=step_time_s, tokens=2048,
                              loss=7.25 - step / 100)


def test_a_step_record_gives_the_figures_a_person_watches():
    live = LiveStep.of(record(3))
    assert live.tokens_per_s == 4096.0  # 2048 tokens in 0.5 s, on this device
    assert live.text() == "4,096 tok/s/dev  loss 7.22"
    assert "(warm-up)" in LiveStep.of(record(0, warmup=True)).text()


def test_in_a_log_a_line_every_fifth_of_the_steps_with_time_left():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=False, width=120))
    progress.start("gpt2_tiny round 1", 10)
    for step in range(10):
        progress.update(step, LiveStep.of(record(step)))
    progress.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "  step 2/10  4,096 tok/s/dev  loss 7.24  ETA 4 s"  # 8 steps of 0.5 s left
    assert len(lines) == 5 and lines[-1] == "  step 10/10  4,096 tok/s/dev  loss 7.16"


def test_on_a_terminal_a_progress_bar_with_the_figures():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=True, width=120))
    progress.start("gpt2_tiny round 1", 10)
    progress.update(4, LiveStep.of(record(4)))
    progress.bar.refresh()
    progress.stop()
    text = out.getvalue()
    assert "5/10" in text and "4,096 tok/s/dev" in text and "ETA" in text


def test_the_bar_is_drawn_at_each_update_and_by_no_thread_of_its_own():
    """rich's own refresh thread would draw 10 times a second on the cores the ranks are measured on."""
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=True, width=120))
    progress.start("gpt2_tiny round 1", 10)
    assert progress.bar.live._refresh_thread is None
    progress.update(6, LiveStep.of(record(6)))
    assert "7/10" in out.getvalue()  # drawn by the update itself, no refresh asked for
    progress.stop()

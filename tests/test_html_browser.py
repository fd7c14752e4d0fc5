"""Every HTML page accelbench writes, opened in a real headless Chromium (tests/infra/browser.py): the history page
(issue 46) and the run's report, compare, sweep and finetune pages. Each renders with no console error, asks for
nothing but its own file (no network, no other file), and every chart on it is displayed with a size; the
history page also shows its change-point markers and every run id. The pages are built from stored rows the
tests make (the same helpers as their own tests), never from new runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from .history_series import rate_series, store_series
from .test_finetune_table import TP2, ZERO2, doc as finetune_doc
from .test_results import document, fill
from .test_sweep_views import sweep_page


def check_page(browser, page: Path, charts_at_least: int = 1) -> None:
    loaded = browser.open_page(page)
    assert loaded.console_errors == [], loaded.console_errors
    assert set(loaded.requests) == {page.resolve().as_uri()}, loaded.requests  # its own file, nothing else
    charts, shown = browser.count("svg.chart"), browser.visible_charts()[1]
    assert charts >= charts_at_least and shown == charts, (charts, shown)


def test_the_history_page_shows_every_chart_change_point_and_run_id(browser, accelbench, tmp_path):
    db = tmp_path / "results.db"
    docs = store_series(db, rate_series(24, drop_at=16, bad_day=7), env={16: {"torch": "2.14.0+cpu"}})
    store_series(db, rate_series(8, seed=3), case="gpt3_tiny", prefix="other")
    page = tmp_path / "history.html"
    done = accelbench("history", "--db", db, "--format", "html", "-o", page)
    assert done.returncode == 0, done.stderr
    check_page(browser, page, charts_at_least=2)
    assert browser.count("[id^='history0-changepoint-']") == 1  # gpt2_tiny's drop, marked on its chart
    assert browser.count("[id^='history0-outlier-']") == 1 and browser.count("[id^='history1-changepoint-']") == 0
    text = browser.text()
    assert all(d["run_id"] in text for d in docs) and "changed here: torch 2.13.0+cpu -> 2.14.0+cpu" in text
    tips = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll(\"g[id^='history0-point-'] > title\")).map(t => t.textContent)")
    assert len(tips) == 23 and tips[0].startswith("run night000, 2026-09-01")  # 24 days less the outlier


def test_the_run_report_page(browser, accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("r1", "gpt3_tiny", "torch", 0.5), document("r1", "gpt3_tiny", "torch", 0.45, round_=2),
              document("r1", "llama_tiny", "torch", 0.7)])
    page = tmp_path / "report.html"
    assert accelbench("report", "r1", "--db", db, "--format", "html", "-o", page).returncode == 0
    check_page(browser, page, charts_at_least=2)


def test_the_compare_page(browser, accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("ra", "gpt3_tiny", "torch", 0.5), document("rb", "gpt3_tiny", "torch", 0.4)])
    page = tmp_path / "compare.html"
    assert accelbench("compare", "ra", "rb", "--db", db, "--html", page).returncode == 0
    check_page(browser, page)


def test_the_sweep_page(browser, accelbench, tmp_path):
    check_page(browser, sweep_page(accelbench, tmp_path)[1])


def test_the_finetune_table_page(browser, accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [finetune_doc("run-a", "llama_tiny_lora", "torch", 1, 0.5),
              finetune_doc("run-a", "llama_tiny_lora", "paddle", 1, 0.25),
              finetune_doc("run-a", "llama_tiny_sft", "paddle", 2, 0.375, sets=TP2),
              finetune_doc("run-a", "llama_tiny_sft", "torch", 2, None, sets=ZERO2, status="oom")])
    page = tmp_path / "finetune.html"
    assert accelbench("table", "finetune", "run-a", "--db", db, "--format", "html", "-o", page).returncode == 0
    check_page(browser, page)


@pytest.mark.parametrize("extra", ["<img src='https://example.invalid/x.png'>", "<script>console.error('x')</script>"])
def test_the_checks_catch_a_request_and_a_console_error(browser, tmp_path, extra):
    """The browser checks themselves: a page that asks the network for an image, or logs an error, fails them."""
    page = tmp_path / "bad.html"
    page.write_text(f"<!DOCTYPE html><html><body><svg class='chart' width='200' height='200'></svg>{extra}"
                    "</body></html>")
    with pytest.raises(AssertionError):
        check_page(browser, page)

"""Text that workers' logs, a store or a bundle hand to the terminal is printed as text, never read as rich markup:
a gloo error quoted in a warning ("[/paddle/third_party/gloo/.../pair.cc:914] TIMEOUT", met under load in CI)
ended a finished run with rich's MarkupError and a traceback instead of its table. Each view that prints such
text: the run's own end (print_results), its progress lines, ``report``, ``show``, ``runs`` and a sweep's views."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from run_benchmarks.cli.run_view import TerminalReporter, print_results
from run_benchmarks.results.report.views import View, to_rich
from run_benchmarks.results.rounds.result import RoundResult

from .test_results import document, fill

GLOO = ("attempt 1 did not start ([rank 0] RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:914] "
        "TIMEOUT self_rank = 0 pair_rank = 1 peer_str = [127.0.0.1]:62349); retried")
MARKUP = "[red]not red[/red] [link=file:///etc/passwd]not a link[/link] [/]"


def _console() -> Console:
    return Console(record=True, width=400, color_system=None)


def _flat(console: Console) -> str:
    return " ".join(console.export_text().split())


def test_the_end_of_a_run_prints_quoted_log_text_as_it_is(tmp_path):
    weird = tmp_path / "[logs]" / "round1"
    done = RoundResult("gpt3_tiny:paddle:TK1:1:2", 1, weird, status="ok", warnings=[GLOO, MARKUP])
    failed = RoundResult("gpt3_tiny:paddle:TK1:1:2", 2, weird, status="failed", reason=f"node 0: {GLOO}",
                         error_lines=[MARKUP])
    console = _console()
    print_results(console, [done, failed], [])
    out = _flat(console)
    assert f"warning gpt3_tiny:paddle:TK1:1:2 #1: {GLOO}" in out and f"#1: {MARKUP}" in out
    assert f"failed gpt3_tiny:paddle:TK1:1:2 #2: node 0: {GLOO}" in out
    assert f"logs: {weird}" in out and f"results: {weird.parent}/round*/results.json" in out


def test_a_rounds_progress_line_prints_its_reason_as_it_is():
    console = _console()
    reporter = TerminalReporter(console)
    reporter.round_finished(None, None, SimpleNamespace(status="failed", reason=GLOO))
    assert f"failed: {GLOO}" in _flat(console)


def test_a_views_cells_title_and_notes_are_text():
    console = _console()
    console.print(to_rich(View(f"title {MARKUP}", ["axis", "figure"], [[MARKUP, "[/x]"]], [GLOO])))
    out = _flat(console)
    assert f"title {MARKUP}" in out and MARKUP in out and "[/x]" in out and GLOO in out


def test_report_show_and_runs_print_a_stores_text_as_it_is(accelbench, tmp_path):
    """A store's rows come from other people's bundles and imports: their labels and reasons are text."""
    db = tmp_path / "results.db"
    ok = document("[/run]", "gpt3_tiny", "torch", 0.5, config="[/etc]/extern[b].yaml")
    ok["warnings"] = [GLOO]
    bad = document("[/run]", "gpt3_tiny", "torch", 0.5, round_=2, status="failed", config="[/etc]/extern[b].yaml")
    bad["reason"] = GLOO
    fill(db, [ok, bad])
    for command in (("report", "[/run]"), ("show", "[/run]"), ("runs",)):
        done = accelbench(*command, "--db", str(db))
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        out = " ".join(done.stdout.split())
        assert "[/run]" in out, (command, out)
    report = " ".join(accelbench("report", "[/run]", "--db", str(db)).stdout.split())
    assert "extern[b]" in report, report
    show = " ".join(accelbench("show", "[/run]", "--db", str(db)).stdout.split())
    assert GLOO in show, show
    assert Path(db).is_file()

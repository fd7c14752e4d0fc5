"""Tables in a narrow terminal: no number is ever cut; a table too wide for the terminal becomes one block of
``column: value`` lines per row."""
from __future__ import annotations

import io

from rich.console import Console

from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.report.terminal import print_summaries
from run_benchmarks.results.store.store import ResultStore

from .test_results import document, fill


def render(db, width: int) -> str:
    out = io.StringIO()
    with ResultStore(db) as store:
        print_summaries(Console(file=out, width=width, force_terminal=False), summarize(store.attempts()), "t")
    return out.getvalue()


def test_an_80_column_terminal_gets_every_figure_whole(tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("r1", "gpt2_tiny", "torch", 0.0005, config="vendors/acme/config_TP1PP1SH2SP8A10080Gx1x8.yaml"),
              document("r1", "gpt2_tiny", "torch", 0.0005, round_=2,
                       config="vendors/acme/config_TP1PP1SH2SP8A10080Gx1x8.yaml")])
    with ResultStore(db) as store:
        (summary,) = summarize(store.attempts())
    tokens = f"{summary.mean('tokens_per_s_per_device'):,.0f}"
    narrow = render(db, 80)
    assert "…" not in narrow and max(len(line) for line in narrow.splitlines()) <= 80
    assert f"tokens/s/device: {tokens}" in narrow  # a whole number, named
    assert "config_TP1PP1SH2SP8A10080Gx1x8" in narrow  # the field that tells rows apart, whole
    wide = render(db, 250)
    assert "┃ case" in wide and tokens in wide and "…" not in wide  # wide enough: the table itself


def test_a_table_that_fits_wraps_columns_but_never_cuts_a_word(tmp_path):
    """Between the two: rich's own squeeze shrank the widest columns alike and cut headers ("tokens/s/devi…");
    every width from the narrowest uncut table up prints the table with every word whole."""
    db = tmp_path / "results.db"
    fill(db, [document("r1", "gpt2_tiny", "torch", 0.0005, config="vendors/acme/config_TP1PP1SH2SP8A10080Gx1x8.yaml")])
    for width in range(100, 200, 7):
        text = render(db, width)
        assert "┃ case" in text or "tokens/s/device: " in text
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width, width
        if "┃ case" in text:
            assert "tokens/s/device" in text and "config_TP1PP1SH2SP8A10080Gx1x8" in text.replace("│", "")

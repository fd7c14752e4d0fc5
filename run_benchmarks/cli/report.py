"""``accelbench report`` and ``compare``: select stored attempts, render and check them (run and sweep reuse checks)."""
from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Optional, Sequence

from rich.console import Console
from rich.markup import escape

from run_benchmarks.results.checks import verdicts
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import write_text_file
from run_benchmarks.results.report import current_peaks
from run_benchmarks.results.report.compare import FACT_FILTERS, Selection, compare
from run_benchmarks.results.report.documents import CompareDocument, Format, ReportDocument
from run_benchmarks.results.report.formats import COMPARE_FORMATS, REPORT_FORMATS
from run_benchmarks.results.report.pairing import nothing_in_common
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.report.terminal import checks_table, print_table
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.results.store.schema import FILTER_KEYS
from run_benchmarks.cli.exit_codes import (EXIT_CONTENDED, EXIT_CONVERGENCE, EXIT_NOTHING_CHECKED, EXIT_OK,
                                          EXIT_REGRESSION)
from run_benchmarks.planner.inputs import default_root


def parse_selection(store: ResultStore, words: Sequence[str]) -> Selection:
    """Run ids, prefixes and ``last`` (the run each resolves to), and KEY=VALUE filters. The selection's text,
    which titles reports, names the run ``last`` stood for: a saved report says which run it is."""
    run_ids, filters, shown = [], {}, []
    for word in (w.strip() for text in words for w in text.split(",") if w.strip()):
        if "=" in word:
            key, value = (part.strip() for part in word.split("=", 1))
            if key not in FILTER_KEYS + FACT_FILTERS:
                raise UserError(f"cannot select by {key!r}", f"use one of: {', '.join(FILTER_KEYS + FACT_FILTERS)}")
            filters[key] = value
            shown.append(word)
        else:
            run_ids.append(store.resolve_run(word))
            shown.append(run_ids[-1] if word in LAST else word)
    if not run_ids and not filters:
        run_ids.append(store.resolve_run("last"))
        shown.append(run_ids[-1])
    return Selection(" ".join(shown), tuple(run_ids), filters)


LAST = ("last", "latest")


def select(store: ResultStore, selection: Selection):
    """The store's filters in SQL, then the layout facts (FACT_FILTERS) per round."""
    from run_benchmarks.results.report.facts import fact_text, round_facts

    stored = {k: v for k, v in selection.filters.items() if k in FILTER_KEYS}
    attempts = store.attempts(stored, selection.run_ids)
    wanted = {k: v for k, v in selection.filters.items() if k not in FILTER_KEYS}
    if wanted:
        def value_of(attempt, key):
            value = round_facts(attempt).facts.get(key)
            return {str(value), fact_text(value), fact_text(value).replace(",", "")}
        attempts = [a for a in attempts if all(v in value_of(a, k) for k, v in wanted.items())]
    if not attempts:
        raise UserError(f"no attempt matches {selection.text!r} in {store.where}", "list the runs: accelbench runs")
    return attempts


def _write(console: Console, text: str, output: Optional[Path], what: str = "-o", end: str = "") -> None:
    if output is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True, end=end)
    else:
        write_text_file(output, text, what)
        console.print(f"wrote {output}", markup=False, soft_wrap=True)


def emit(console: Console, chosen: Format, document, output: Optional[Path], what: str = "-o",
         end: str = "") -> None:
    """The document rendered in the chosen format, printed or written to ``output``: a terminal format prints
    on the console, or on a recording one of its width whose text goes to the file."""
    rendered = chosen.render(document)
    if callable(rendered):
        if output is None:
            rendered(console)
            return
        recorder = Console(file=io.StringIO(), width=chosen.width, highlight=False, record=True)
        rendered(recorder)
        rendered = recorder.export_text()
    _write(console, rendered, output, what, end)


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    root = (args.root or default_root()).resolve()
    with open_store(args) as store:
        selection = parse_selection(store, args.select)
        attempts = select(store, selection)
    summaries = summarize(attempts)
    current_peaks.add(summaries, root / "vendors")  # MFU against a peak calibrated after the rounds ran
    checks, unchecked, losses = verdicts.of_summaries(summaries, root) if args.check else ([], [], [])
    document = ReportDocument(f"accelbench report: {selection.text}", summaries, attempts, checks, losses, root)
    emit(console, REPORT_FORMATS.get(args.format), document, args.output)
    return report_checks(console, (checks, unchecked, losses), args.check, args.no_reference_expected)


def report_checks(console: Console, found, asked: bool, none_expected: bool = False) -> int:
    """``found``: the verdicts (results/checks/verdicts.py: checks, unchecked, loss verdicts). Nothing checked at all is
    its own exit status (EXIT_NOTHING_CHECKED), unless the user said no reference is expected."""
    if not asked:
        return EXIT_OK
    checks, unchecked, losses = found
    for line in unchecked:
        console.print(f"--check: not checked: {line}", markup=False, highlight=False, soft_wrap=True)
    converged = print_loss_verdicts(console, losses)
    if not checks and any(not v.refused for v in losses):
        return EXIT_OK if converged else EXIT_CONVERGENCE
    if not checks:
        if none_expected:
            console.print("--check: nothing checked (no reference matches; --no-reference-expected)", markup=False)
            return EXIT_OK
        console.print(f"[red]--check: nothing checked: no reference matches these rows[/] (add an entry to the "
                      "case's or vendor's references.yaml, or pass --no-reference-expected); "
                      f"exit {EXIT_NOTHING_CHECKED}", soft_wrap=True)
        return EXIT_NOTHING_CHECKED
    print_table(console, checks_table(checks))
    contended = [c for c in checks if c.contended]
    judged = [c for c in checks if not c.contended]
    failed = [c for c in judged if not c.passed]
    if failed:
        console.print(f"[red]{len(failed)} of {len(judged)} judged figure(s) outside their reference band[/]")
    elif judged:
        console.print(f"[green]all {len(judged)} judged figure(s) within their reference band[/]")
    if contended:
        rows = dict.fromkeys(f"{c.case} {c.config}" for c in contended)
        console.print(f"[yellow]--check: not judged: contended[/]: {len(contended)} figure(s) of "
                      f"{escape(', '.join(rows))} "
                      f"(run again on a quiet machine); exit {EXIT_CONTENDED} unless a judged figure failed",
                      soft_wrap=True)
    return EXIT_CONVERGENCE if not converged else EXIT_REGRESSION if failed else \
        EXIT_CONTENDED if contended else EXIT_OK


def print_loss_verdicts(console: Console, verdicts) -> bool:
    """Each loss verdict with its numbers and the settings that differ; False when a comparable run failed (a
    refused one, not comparable, is reported and fails nothing)."""
    for v in verdicts:
        console.print(f"--check: loss of {v.label} against {v.reference}: {v.verdict}", markup=False,
                      highlight=False, soft_wrap=True)
        for line in ([] if v.refused else v.reasons()):
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
        if v.differing:
            console.print(f"  differs from the reference in: {'; '.join(v.differing)}", markup=False,
                          highlight=False, soft_wrap=True)
    failed = [v for v in verdicts if not v.refused and not v.passed]
    if failed:
        console.print(f"[red]{len(failed)} loss curve(s) outside their reference band[/]; exit {EXIT_CONVERGENCE}")
    return not failed


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        a, b = parse_selection(store, [args.a]), parse_selection(store, [args.b])
        rows = compare(a, b, select(store, a), select(store, b))
    alone = nothing_in_common(rows)
    if alone is not None:  # once, with the closest pairs: not a "(no run)" line per workload
        for line in [f"A = {a.text}   B = {b.text}"] + alone:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if args.html is not None:
            console.print(f"{args.html} not written: nothing to compare", markup=False, soft_wrap=True)
        return EXIT_OK
    if args.html is not None:
        from run_benchmarks.results.report import html  # its charts need matplotlib: imported only for an HTML page

        write_text_file(args.html, html.render_compare(a, b, rows), "--html")
        console.print(f"wrote {args.html}", markup=False, soft_wrap=True)
    emit(console, COMPARE_FORMATS.get(args.format), CompareDocument(a, b, rows), None)
    return EXIT_OK

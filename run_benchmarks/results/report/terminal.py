"""Tables in the terminal from the results store: the summary per workload, checks against references,
comparisons; printed to fit the terminal's width. What ``accelbench run`` prints as it goes is cli/run_view.py."""
from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from run_benchmarks.results.report import compliance_marks



STATUS_STYLE = {"ok": "green", "failed": "red", "oom": "red", "unsupported": "magenta", "timeout": "yellow",
                 "interrupted": "yellow"}



def print_table(console: Console, table: Table) -> None:
    """The table where it fits the terminal. Where it does not (an 80-column terminal), each row as a block
    of ``column: value`` lines: rich would otherwise squeeze every column and cut the numbers ("16,…")."""
    headers = [_text(c.header).plain.replace("\n", " ") for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    widths = _fitted_widths(headers, cells, console.width - 3 * len(headers) - 1)  # less padding and borders
    if widths is not None:
        for column, width in zip(table.columns, widths):  # rich's own squeeze cuts words ("tokens/s/devi…")
            column.width = width
        console.print(table)
        return
    if table.title:
        console.print(Text(str(table.title), style="bold"))
    for row in range(table.row_count):
        console.print(Text.assemble(_text(cells[0][row]), style="bold"), soft_wrap=True)
        for header, column in zip(headers[1:], cells[1:]):
            value = _text(column[row])
            if value.plain.strip():
                console.print(Text.assemble(f"  {header}: ", value), soft_wrap=True)
    if table.caption:
        console.print(Text(str(table.caption)), soft_wrap=True)


def _fitted_widths(headers: list[str], cells: list[list], room: int) -> Optional[list[int]]:
    """Column widths that fit ``room`` with no word cut: each column starts at its widest line and the widest
    column that can still wrap gives up a character until the table fits; None where even each column's
    longest word (a number is one) does not fit."""
    texts = [[header] + [_text(c).plain for c in column] for header, column in zip(headers, cells)]
    least = [max(len(w) for text in column for w in text.split() or [""]) or 1 for column in texts]
    natural_widths = [max(len(line) for text in column for line in text.splitlines() or [""]) or 1
                      for column in texts]
    widths = list(natural_widths)
    if sum(least) > room:
        return None
    while sum(widths) > room:
        index = max((i for i in range(len(widths)) if widths[i] > least[i]), key=lambda i: widths[i])
        widths[index] = _wrapped_width(texts[index], widths[index] - 1)  # what its wrapped lines really need
    for index, natural in enumerate(natural_widths):  # a wrap that the room left over can undo
        if sum(widths) - widths[index] + natural <= room:
            widths[index] = natural
    return widths


def _wrapped_width(texts: list[str], width: int) -> int:
    """The longest line of ``texts`` wrapped at word boundaries into ``width`` columns."""
    longest = 0
    for text in texts:
        for line in text.splitlines() or [""]:
            current = -1
            for word in line.split():
                current = len(word) if current < 0 or current + 1 + len(word) > width else current + 1 + len(word)
                longest = max(longest, current)
    return max(longest, 1)


def _text(cell) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def layout_summary(workload, world_size: int) -> str:
    """``data 4 (sharding stage1 over 4) x tensor 2 x pipeline 1 (1f1b) = 8 ranks`` and the switches."""
    par = workload.parallel
    data = par.data_degree(world_size)
    text = f"data {data}"
    if par.sharding != "none":
        text += f" (sharding {par.sharding} over {par.sharding_parallel_degree or data})"
    text += f" x tensor {par.tensor_parallel_degree} x pipeline {par.pipeline_parallel_degree}"
    if par.pipeline_parallel_degree > 1:
        text += f" ({par.pipeline_schedule}, {workload.train.gradient_accumulation_steps} micro-batches)"
    text += f" = {world_size} ranks"
    extras = [name for name, on in (("sequence parallel", par.sequence_parallel), ("offload", par.offload),
                                    (f"recompute {workload.train.recompute}", workload.train.recompute != "none"),
                                    (f"AMP {workload.train.amp_level}", workload.train.precision in ("fp16", "bf16")))
              if on]
    return text + (f"; {', '.join(extras)}" if extras else "")


# ---------------------------------------------------------------- from the results store


_WHERE_MEASURED = ("effective_tokens_per_s_per_device", "mfu_measured", "mfu_current_peak", "time_to_train_s",
                   "eval_accuracy")


def samples_only(summaries) -> bool:
    """A row with samples/s and no tokens/s (an MLPerf import of BERT, DLRM, R-GAT, RetinaNet): the report then
    shows samples/s, where every throughput column would read n/a."""
    return any(s.mean("samples_per_s") is not None and s.mean("tokens_per_s_per_device") is None
               and s.mean("tokens_per_s_total") is None for s in summaries)


def summary_table(summaries, title: str) -> Table:
    """One row per workload: each figure's mean over ok rounds (± its coefficient of variation). The layout
    and batch facts that differ between the rows are columns of their own, so no two rows look alike."""
    from run_benchmarks.results.report.facts import FACT_LABEL, fact_text, varying_settings
    from run_benchmarks.results.report.summary import FIGURE_BY_KEY

    table = Table(title=Text(title, style="table.title"))  # it names the run: a store's text
    columns = ("tokens_per_s_per_device", "effective_tokens_per_s_per_device", "tokens_per_s_total", "samples_per_s",
               "tflops_per_device", "mfu", "mfu_measured", "mfu_current_peak", "step_time_median_s", "time_to_train_s",
               "eval_accuracy")
    # Effective tokens/s (padding left out) only where a round pads, "MFU (measured)" only once a round has a
    # calibrated peak, MLPerf's time to train and eval accuracy only where an imported MLPerf log gave them:
    # a column of n/a would push the others to wrap
    columns = tuple(k for k in columns if k not in _WHERE_MEASURED or any(s.mean(k) is not None for s in summaries))
    columns = tuple(k for k in columns if k != "samples_per_s" or samples_only(summaries))
    varying = varying_settings(summaries)  # train.steps 15 and 12 are a column too, not two identical rows
    table.add_column("case", no_wrap=True)
    table.add_column("config", overflow="fold")
    for key in varying:
        table.add_column(FACT_LABEL.get(key, key), justify="right")
    table.add_column("rounds")
    policy = compliance_marks.any_departs(summaries)  # a column only where some row departs
    if policy:
        table.add_column("policy")
    for key in columns:
        table.add_column(FIGURE_BY_KEY[key].label, justify="right")
    table.add_column("memory actual / total", justify="right")
    measured = any(s.contention_cell() != "n/a" for s in summaries)  # imports and older rows: no such column
    if measured:
        table.add_column("contention")  # a contended row is never judged (results/figures/contention.py)
    for s in summaries:
        rounds = ", ".join(f"[{STATUS_STYLE.get(st, '')}]{n} {st}[/]" for st, n in s.statuses.items())
        cell = s.contention_cell()
        # labels, configs and facts come from the store (a bundle's, an import's): text, never markup
        table.add_row(Text(s.label), Text(s.config), *[Text(fact_text(s.facts.get(k))) for k in varying], rounds,
                      *([_policy_cell(s)] if policy else []), *[s.cell(key) for key in columns], Text(s.memory()),
                      *([f"[yellow]{cell}[/]" if cell.startswith("contended") else cell] if measured else []))
    return table


def _policy_cell(summary) -> str:
    word = compliance_marks.word(summary.attempts)
    return f"[red]{word.upper()}[/]" if word == compliance_marks.NON_COMPLIANT else word


def checks_table(checks) -> Table:
    from run_benchmarks.results.report.summary import FIGURE_BY_KEY

    table = Table(title="against the references")
    for column in ("case", "config", "figure", "measured", "reference (band)", "verdict", "reference entry"):
        table.add_column(column, justify="right" if column in ("measured", "reference (band)") else "left")
    for c in checks:
        fmt = FIGURE_BY_KEY[c.figure].fmt
        table.add_row(Text(c.case), Text(c.config), c.figure, "n/a" if c.measured is None else fmt(c.measured),
                      f"{fmt(c.reference.value)} ({fmt(c.low)} – {fmt(c.high)})",
                      f"[{'yellow' if c.contended else 'green' if c.passed else 'red'}]{escape(c.verdict)}[/]",
                      escape(c.source))
    return table


def print_summaries(console: Console, summaries, title: str) -> None:
    """The table, its footnotes (what MFU divides by, the FLOP formula: the same lines a run prints at its
    end), a PPO workload's per-phase table (ppo_phases.py) and each row's flags."""
    from run_benchmarks.results.report.facts import describe, varying_settings

    from run_benchmarks.results.report.ppo_phases import ppo_phase_views
    from run_benchmarks.results.report.views import to_rich

    from run_benchmarks.results.report.footnotes import footnotes

    print_table(console, summary_table(summaries, title))
    note = compliance_marks.ranking_note(summaries)
    if note:
        console.print(f"[red]⚑[/] {escape(note)}", soft_wrap=True)
    for line in footnotes(summaries):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for view in ppo_phase_views(summaries):  # an RLHF workload's phases, as ColossalAI's benchmark sums them up
        console.print(to_rich(view))
    varying = varying_settings(summaries)
    for s in summaries:
        which = f" ({describe(s.facts, varying)})" if varying else ""
        for flag in s.flags:
            console.print(f"[yellow]⚑[/] {escape(f'{s.label} {s.config}{which}: {flag}')}", soft_wrap=True)


def compare_table(a, b, rows) -> Table:
    """A against B per paired workload: each side's mean ± CV with its rounds, and the change, marked when
    it is inside the two sides' combined noise (compare.NOISE_RULE, printed as the caption)."""
    from run_benchmarks.results.report.compare import (NOISE_RULE, compared, format_change, format_rounds, format_value)

    table = Table(title=escape(f"A = {a.text}   B = {b.text}   (B vs A: +32% = B does 32% more)"), caption=NOISE_RULE)
    for column, justify in (("case", "left"), ("figure", "left"), ("A (mean ±CV)", "right"), ("A rounds", "left"),
                            ("B (mean ±CV)", "right"), ("B rounds", "left"), ("B vs A", "right")):
        table.add_column(column, justify=justify, overflow="fold")
    figures = compared(rows)
    for row in rows:
        for i, figure in enumerate(figures):
            first = i == 0
            # the label names the differing setting in brackets: text, never read as markup
            table.add_row(Text(row.label) if first else "", row.figure_label(figure), format_value(row.a, figure, row),
                          format_rounds(row.a) if first else "", format_value(row.b, figure, row),
                          format_rounds(row.b) if first else "", escape(format_change(row, figure, lines=True)),
                          end_section=i == len(figures) - 1)
    return table

"""What a person sees in the terminal: progress while a run goes, a table when it ends."""
from __future__ import annotations

import shlex
from typing import Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from run_benchmarks.backends.schedulers import get as get_scheduler
from run_benchmarks.execute.outcome import RoundResult
from run_benchmarks.planner.plan import CasePlan, RoundPlan, RunPlan
from run_benchmarks.results.report.live import LiveProgress, LiveStep
from run_benchmarks.results.report.sweep_views import to_rich
from run_benchmarks.results.report.task_figures import micro_views
from run_benchmarks.results.store.schema import Attempt, with_columns
from run_benchmarks.results.report.summary import summarize


def _device_summary(case) -> str:
    """What the accelerator kind resolves to for this case: how the worker addresses the device and how the
    hosts are checked and watched."""
    device, kind = case.rounds[0].worker_config.runtime.device, case.hardware.kind
    monitor = device.monitor if isinstance(device.monitor, str) else f"command {device.monitor.command[0]}"
    counted = " or ".join(" ".join(c.command) for c in kind.device_count) or "not counted"
    return (f"torch {device.torch_device} / paddle {device.paddle_device}, backend {device.backend or 'default'}, "
            f"visible {device.visible_devices_env or '-'}, counted by {counted}, monitor {monitor}")


_STATUS_STYLE = {"ok": "green", "failed": "red", "oom": "red", "unsupported": "magenta", "timeout": "yellow",
                 "interrupted": "yellow"}


def _what_runs(case: CasePlan) -> str:
    if case.workload.task == "micro":  # its train section is a placeholder: it has no steps
        return f"micro-benchmark {case.name.case}"
    return f"{case.workload.train.steps} steps ({case.workload.train.warmup_steps} warm-up)"


class TerminalReporter:
    """Progress lines on stderr, so stdout stays for the result table."""

    def __init__(self, console: Optional[Console] = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.live = LiveProgress(self.console)

    def round_started(self, case: CasePlan, rnd: RoundPlan) -> None:
        hosts = ", ".join(dict.fromkeys(n.host.name for n in rnd.nodes))
        self.console.print(f"[bold]▶ {case.name}[/] round {rnd.index}/{len(case.rounds)}: "
                           f"{case.name.nnodes} node(s) x {case.name.nprocs_per_node} process(es) on {hosts}; "
                           f"{_what_runs(case)}; logs in {rnd.dir}")
        self.live.start(f"{case.name.case} round {rnd.index}", case.workload.train.steps)

    def progress(self, case: CasePlan, rnd: RoundPlan, step: int, live: Optional[LiveStep] = None) -> None:
        self.live.update(step, live)

    def round_finished(self, case: CasePlan, rnd: RoundPlan, result: RoundResult) -> None:
        self.live.stop()
        style = _STATUS_STYLE.get(result.status, "")
        detail = f": {result.reason}" if result.reason else ""
        self.console.print(f"  [{style}]{result.status}[/]{detail}")


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


def print_results(console: Console, results: list[RoundResult], cases: list[CasePlan]) -> None:
    """The end of a run: the same table as ``accelbench report RUN`` (one row per workload, made from the
    rounds' records as the store holds them), then the notes, warnings and failures round by round."""
    attempts = [Attempt(with_columns(r.record.to_row())) for r in results if r.record is not None]
    print_summaries(console, summarize(attempts), "accelbench results (warm-up excluded)")
    notes = {r.metrics.mfu_note for r in results if r.metrics and r.metrics.mfu is None}
    for note in sorted(notes):
        console.print(f"MFU n/a: {note}", markup=False, soft_wrap=True)
    for note in sorted({r.metrics.mfu_note for r in results if r.metrics and r.metrics.mfu is not None}):
        console.print(note, markup=False, soft_wrap=True)  # which peak, and what it means
    measured = any(r.metrics and r.metrics.mfu_measured is not None for r in results)
    for note in sorted({r.metrics.mfu_measured_note for r in results if r.metrics and r.metrics.mfu_measured_note}):
        if note.startswith("MFU (measured)"):
            console.print(note, markup=False, soft_wrap=True)  # the calibration it divides by
        else:  # the column is there only when some round has one; otherwise a hint
            console.print(("² MFU (measured) n/a: " if measured else "MFU against a measured peak: n/a, ") + note,
                          markup=False, soft_wrap=True)
    formulas = {r.metrics.flop_formula for r in results if r.metrics}
    for formula in sorted(formulas):
        console.print(f"FLOPs: {formula}")
    for r in results:  # a micro-benchmark round's figures are its own tables, not the training columns
        if r.status == "ok" and r.metrics is None and r.figures:
            console.print(f"[bold]{r.case_name}[/] round {r.round}:", soft_wrap=True)
            views, _ = micro_views(r.figures)
            for view in views:
                console.print(to_rich(view))
    for r in results:
        for warning in r.warnings:
            console.print(f"[yellow]warning[/] {r.case_name} #{r.round}: {warning}", soft_wrap=True)
        if r.status != "ok":
            console.print(f"[red]{r.status}[/] {r.case_name} #{r.round}: {r.reason}", soft_wrap=True)
            for line in r.error_lines:
                console.print(f"    {line}", markup=False, soft_wrap=True)
            console.print(f"    logs: {r.dir}")
    seen = set()
    for r in results:
        if r.dir.parent not in seen:
            seen.add(r.dir.parent)
            console.print(f"results: {r.dir.parent}/round*/results.json", soft_wrap=True)


def print_plan(console: Console, plan: RunPlan) -> None:
    def say(text: str, markup: bool = False) -> None:
        console.print(text, markup=markup, soft_wrap=True)  # paths and argv stay whole, for copy and paste

    say(f"[bold]run {plan.run_id}[/] (dry run: nothing is started) -> {plan.dir}", markup=True)
    for case in plan.cases:
        w = case.workload
        say(f"\n[bold]{case.name}[/]  vendor {case.hardware.vendor}, hardware {case.hardware.name} "
            f"(kind {case.hardware.spec.kind}), framework {case.framework.name}", markup=True)
        say(f"  case file: {case.case_file}")
        say(f"  extern config: {case.extern_config or '(none)'}")
        say(f"  model: {w.model.family} L={w.model.n_layer} d={w.model.d_model} heads={w.model.n_head} "
            f"seq={w.model.seq_len} vocab={w.model.vocab_size}")
        say(f"  train: micro batch {w.train.micro_batch_size} x accumulation {w.train.gradient_accumulation_steps}, "
            f"{w.train.steps} steps ({w.train.warmup_steps} warm-up), {w.train.precision}; "
            f"deadline {case.timeout_s:g} s")
        say(f"  layout: {layout_summary(w, case.name.world_size)}")
        say(f"  device: {_device_summary(case)}")
        for rnd in case.rounds:
            say(f"  round {rnd.index}: {rnd.dir}")
            say(f"    worker config: {rnd.config_path}")
            say(f"    results: {rnd.results_path}")
            for node in rnd.nodes:
                say(f"    node {node.node_rank} on host {node.host.name} ({node.host.backend} {node.host.address})")
                say(f"      argv: {shlex.join(node.argv)}")
                for key, value in sorted(node.env.items()):
                    say(f"      env {key}={value}")
                say(f"      cwd: {node.cwd}")
                if node.monitor_argv:
                    say(f"      monitor: {shlex.join(node.monitor_argv)}")
                say(f"      logs: {node.log_dir}/launcher.log, "
                    + ", ".join(f"{node.log_dir}/{name}" for name in case.framework.rank_log_names))
        if plan.cluster is not None and plan.cluster.scheduler != "hosts":
            say(f"  {plan.cluster.scheduler}: what round 1 submits (later rounds alike, in their own folders):")
            for line in get_scheduler(plan.cluster.scheduler).dry_run(plan, case):
                say(f"    {line}")


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


_WHERE_MEASURED = ("effective_tokens_per_s_per_device", "mfu_measured")


def summary_table(summaries, title: str) -> Table:
    """One row per workload: each figure's mean over ok rounds (± its coefficient of variation). The layout
    and batch facts that differ between the rows are columns of their own, so no two rows look alike."""
    from run_benchmarks.results.report.facts import FACT_LABEL, differing, fact_text
    from run_benchmarks.results.report.summary import FIGURE_BY_KEY

    table = Table(title=title)
    columns = ("tokens_per_s_per_device", "effective_tokens_per_s_per_device", "tokens_per_s_total",
               "tflops_per_device", "mfu", "mfu_measured", "step_time_median_s")
    # Effective tokens/s (padding left out) only where a round pads, "MFU (measured)" only once a round has a
    # calibrated peak: a column of n/a would push the others to wrap
    columns = tuple(k for k in columns if k not in _WHERE_MEASURED or any(s.mean(k) is not None for s in summaries))
    varying = differing([s.facts for s in summaries])
    table.add_column("case", no_wrap=True)
    table.add_column("config", overflow="fold")
    for key in varying:
        table.add_column(FACT_LABEL[key], justify="right")
    table.add_column("rounds")
    for key in columns:
        table.add_column(FIGURE_BY_KEY[key].label, justify="right")
    table.add_column("memory actual / total", justify="right")
    for s in summaries:
        rounds = ", ".join(f"[{_STATUS_STYLE.get(st, '')}]{n} {st}[/]" for st, n in s.statuses.items())
        table.add_row(s.label, s.config, *[fact_text(s.facts.get(k)) for k in varying], rounds,
                      *[s.cell(key) for key in columns], s.memory())
    return table


def checks_table(checks) -> Table:
    from run_benchmarks.results.report.summary import FIGURE_BY_KEY

    table = Table(title="against the references")
    for column in ("case", "config", "figure", "measured", "reference (band)", "verdict"):
        table.add_column(column, justify="right" if column in ("measured", "reference (band)") else "left")
    for c in checks:
        fmt = FIGURE_BY_KEY[c.figure].fmt
        table.add_row(c.case, c.config, c.figure, "n/a" if c.measured is None else fmt(c.measured),
                      f"{fmt(c.reference.value)} ({fmt(c.low)} – {fmt(c.high)})",
                      f"[{'green' if c.passed else 'red'}]{c.verdict}[/]")
    return table


def print_summaries(console: Console, summaries, title: str) -> None:
    from run_benchmarks.results.report.facts import describe, differing

    print_table(console, summary_table(summaries, title))
    varying = differing([s.facts for s in summaries])
    for s in summaries:
        which = f" ({describe(s.facts, varying)})" if varying else ""
        for flag in s.flags:
            console.print(f"[yellow]⚑[/] {s.label} {s.config}{which}: {flag}", soft_wrap=True)


def compare_table(a, b, rows) -> Table:
    """A against B per paired workload: each side's mean ± CV with its rounds, and the change, marked when
    it is inside the two sides' combined noise (compare.NOISE_RULE, printed as the caption)."""
    from run_benchmarks.results.report.compare import (COMPARED, NOISE_RULE, SHORT, format_change, format_rounds, format_value)

    table = Table(title=f"A = {a.text}   B = {b.text}   (B vs A: +32% = B does 32% more)", caption=NOISE_RULE)
    for column, justify in (("case", "left"), ("figure", "left"), ("A (mean ±CV)", "right"), ("A rounds", "left"),
                            ("B (mean ±CV)", "right"), ("B rounds", "left"), ("B vs A", "right")):
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        for i, figure in enumerate(COMPARED):
            first = i == 0
            table.add_row(row.label if first else "", SHORT[figure], format_value(row.a, figure),
                          format_rounds(row.a) if first else "", format_value(row.b, figure),
                          format_rounds(row.b) if first else "", format_change(row, figure),
                          end_section=i == len(COMPARED) - 1)
    return table

"""What ``accelbench run`` prints: the plan (--dry-run), a line as each round starts and ends with live progress
between, and at the end the results table (the same as ``accelbench report RUN``) with notes and failures."""
from __future__ import annotations

import shlex
from typing import Optional

from rich.console import Console
from rich.markup import escape

from training.contract.tasks import task_of

from run_benchmarks.backends import launchers
from run_benchmarks.backends.schedulers import get as get_scheduler
from run_benchmarks.catalog.compliance import NON_COMPLIANT
from run_benchmarks.plan import CasePlan, RoundPlan, RunPlan
from run_benchmarks.planner.estimates import estimate
from run_benchmarks.results.report.live import LiveProgress, LiveStep
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.report.task_figures import micro_views
from run_benchmarks.results.report.terminal import STATUS_STYLE, layout_summary, print_summaries
from run_benchmarks.results.report.views import to_rich
from run_benchmarks.results.rounds.result import RoundResult
from run_benchmarks.results.store.schema import Attempt, with_columns


def _device_summary(case) -> str:
    """What the accelerator kind resolves to for this case: how the worker addresses the device and how the
    hosts are checked and watched."""
    device, kind = case.rounds[0].worker_config.runtime.device, case.hardware.kind
    monitor = device.monitor if isinstance(device.monitor, str) else f"command {device.monitor.command[0]}"
    counted = " or ".join(" ".join(c.command) for c in kind.device_count) or "not counted"
    return (f"torch {device.torch_device} / paddle {device.paddle_device}, backend {device.backend or 'default'}, "
            f"visible {device.visible_devices_env or '-'}, counted by {counted}, monitor {monitor}")



def compliance_lines(case: CasePlan) -> list[str]:
    """The case's verdict against its policy (catalog/compliance.py): one line, then a line per departure."""
    verdict = case.compliance
    if verdict is None:
        return ["policy: not judged (this tree has no cases/policy.yaml)"]
    if verdict.compliant:
        return [f"policy: compliant ({', '.join(verdict.policy)})"]
    return ([f"policy: {NON_COMPLIANT.upper()}: it runs, and its rounds are recorded and shown marked {NON_COMPLIANT} "
             "(--strict refuses it)"] + [f"  departs: {d.sentence()}" for d in verdict.departures])


def _what_runs(case: CasePlan) -> str:
    if not task_of(case.workload.task).trains:  # its train section is a placeholder: it has no steps
        return f"micro-benchmark {case.name.case}"
    return f"{case.workload.train.steps} steps ({case.workload.train.warmup_steps} warm-up)"


class TerminalReporter:
    """Progress lines on stderr, so stdout stays for the result table."""

    def __init__(self, console: Optional[Console] = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.live = LiveProgress(self.console)

    def round_started(self, case: CasePlan, rnd: RoundPlan) -> None:
        hosts = ", ".join(dict.fromkeys(n.host.name for n in rnd.nodes))
        self.console.print(f"[bold]▶ {escape(str(case.name))}[/] round {rnd.index}/{len(case.rounds)}: "
                           f"{case.name.nnodes} node(s) x {case.name.nprocs_per_node} process(es) on "
                           f"{escape(hosts)}; {escape(_what_runs(case))}; logs in {escape(str(rnd.dir))}")
        self.live.start(f"{case.name.case} round {rnd.index}", case.workload.train.steps)

    def progress(self, case: CasePlan, rnd: RoundPlan, step: int, live: Optional[LiveStep] = None) -> None:
        self.live.update(step, live)

    def notice(self, text: str) -> None:
        """Something the person watching should know now (another run started beside this one)."""
        self.console.print(f"[yellow]warning:[/] {escape(text)}", soft_wrap=True)

    def round_finished(self, case: CasePlan, rnd: RoundPlan, result: RoundResult) -> None:
        self.live.stop()
        style = STATUS_STYLE.get(result.status, "")
        detail = f": {escape(result.reason)}" if result.reason else ""  # a reason quotes the workers' logs
        self.console.print(f"  [{style}]{result.status}[/]{detail}")


def print_results(console: Console, results: list[RoundResult], cases: list[CasePlan]) -> None:
    """The end of a run: the same table as ``accelbench report RUN`` (one row per workload, made from the
    rounds' records as the store holds them), then the notes, warnings and failures round by round."""
    attempts = [Attempt(with_columns(r.record.to_row())) for r in results if r.record is not None]
    # the footnotes (MFU's peak or why none, the FLOP formula) are print_summaries', as in `accelbench report`
    print_summaries(console, summarize(attempts), "accelbench results (warm-up excluded)")
    for r in results:  # where each round's step time went: its biggest lever (results/breakdown/step.py)
        lever = ((r.metrics.time_breakdown or {}) if r.metrics else {}).get("lever")
        if lever:
            console.print(f"{r.case_name} #{r.round} where the time goes: {lever}", markup=False, soft_wrap=True)
    for r in results:  # a micro-benchmark round's figures are its own tables, not the training columns
        if r.status == "ok" and r.metrics is None and r.figures:
            console.print(f"[bold]{escape(r.case_name)}[/] round {r.round}:", soft_wrap=True)
            views, _ = micro_views(r.figures)
            for view in views:
                console.print(to_rich(view))
    for r in results:
        for warning in r.warnings:
            # warnings and reasons quote the workers' logs (a gloo error's "[/paddle/...pair.cc:914]"): text, not markup
            console.print(f"[yellow]warning[/] {escape(r.case_name)} #{r.round}: {escape(warning)}", soft_wrap=True)
        if r.status != "ok":
            console.print(f"[red]{r.status}[/] {escape(r.case_name)} #{r.round}: {escape(r.reason or '')}",
                          soft_wrap=True)
            for line in r.error_lines:
                console.print(f"    {line}", markup=False, soft_wrap=True)
            console.print(f"    logs: {r.dir}", markup=False, soft_wrap=True)
    seen = set()
    for r in results:
        if r.dir.parent not in seen:
            seen.add(r.dir.parent)
            console.print(f"results: {r.dir.parent}/round*/results.json", markup=False, soft_wrap=True)


def print_extern_configs(console: Console, plan: RunPlan) -> None:
    """Before a real run (stderr): which extern config file each case reads, with the notes that are not per
    key (the dry run lists every key), and the estimates' warnings (past the deadline, cannot fit)."""
    for case in plan.cases:
        if case.extern_config is None:
            continue
        console.print(f"{case.name}: extern config {case.extern_config}", markup=False, soft_wrap=True)
        for note in case.notes:
            if not note.startswith(" "):
                console.print(f"  {note}", markup=False, soft_wrap=True)
    for case in plan.cases:  # a departing case is said before it runs, as the dry run says it
        if case.compliance is not None and not case.compliance.compliant:
            for line in compliance_lines(case):
                console.print(f"[yellow]warning[/] {case.name}: {escape(line)}", soft_wrap=True)
    for case in plan.cases:  # what the dry run warns of (planner/estimates.py), said before the run starts
        for warning in estimate(case).warnings:
            console.print(f"[yellow]warning[/] {case.name}: {escape(warning)}", soft_wrap=True)


def print_plan(console: Console, plan: RunPlan) -> None:
    def say(text: str, markup: bool = False) -> None:
        console.print(text, markup=markup, soft_wrap=True)  # paths and argv stay whole, for copy and paste

    say(f"[bold]run {plan.run_id}[/] (dry run: nothing is started) -> {plan.dir}", markup=True)
    for case in plan.cases:
        w = case.workload
        say(f"\n[bold]{escape(str(case.name))}[/]  " + escape(f"vendor {case.hardware.vendor}, hardware "
            f"{case.hardware.name} (kind {case.hardware.spec.kind}), framework {case.framework.name}"), markup=True)
        say(f"  case file: {case.case_file}")
        say(f"  extern config: {case.extern_config or '(none)'}")
        for note in case.notes:
            say(f"    {note}")
        say(f"  model: {w.model.family} L={w.model.n_layer} d={w.model.d_model} heads={w.model.n_head} "
            f"seq={w.model.seq_len} vocab={w.model.vocab_size}")
        say(f"  train: micro batch {w.train.micro_batch_size} x accumulation {w.train.gradient_accumulation_steps}, "
            f"{w.train.steps} steps ({w.train.warmup_steps} warm-up), {w.train.precision}; "
            f"deadline {case.timeout_s:g} s")
        say(f"  layout: {layout_summary(w, case.name.world_size)}")
        for line in compliance_lines(case):
            say(f"  {line}")
        say(f"  device: {_device_summary(case)}")
        say("  contended past: " + ", ".join(f"{key} {'off' if value is None else value}"
                                             for key, value in case.contention.model_dump().items()))
        guess = estimate(case)
        for note in guess.notes:
            say(f"  estimate: {note}")
        for warning in guess.warnings:
            say(f"  [yellow]warning[/] {escape(warning)}", markup=True)
        scheduler = get_scheduler(plan.cluster.scheduler if plan.cluster is not None else "hosts")
        for rnd in case.rounds:
            say(f"  round {rnd.index}: {rnd.dir}")
            say(f"    master port: {scheduler.port_choice(rnd)}")
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
                    + ", ".join(f"{node.log_dir}/{name}" for name in launchers.of(case).log_names))
        if plan.cluster is not None and plan.cluster.scheduler != "hosts":
            say(f"  {plan.cluster.scheduler}: what round 1 submits (later rounds alike, in their own folders):")
            for line in get_scheduler(plan.cluster.scheduler).dry_run(plan, case):
                say(f"    {line}")

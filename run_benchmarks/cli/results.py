"""The commands that read the results store: runs, show (store repair and copy live in store.py, report and
compare in report.py, import in imports.py, bundle in bundle.py)."""
from __future__ import annotations

import argparse
import socket
from datetime import datetime
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from run_benchmarks.catalog.compliance import NON_COMPLIANT
from run_benchmarks.errors import UserError
from run_benchmarks.cli.exit_codes import EXIT_OK
from run_benchmarks.results.report.summary import FIGURE_BY_KEY
from run_benchmarks.results.figures import contention, memory
from run_benchmarks.results.report import sources
from run_benchmarks.results.report.views import to_rich
from run_benchmarks.results.report.task_figures import interconnect_line, micro_views
from run_benchmarks.results.breakdown.words import describe as describe_breakdown
from run_benchmarks.results.report.summary import human_bytes
from run_benchmarks.results.store.faults import process_alive
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.execute.monitoring import WHOLE_ROUND

WINDOWED = ("accel_util_mean", "power_w_mean", "energy_j")  # the monitor's figures over its window


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        rows = store.runs(args.limit or None)
    host = socket.gethostname()
    table = Table(title=f"runs in {store.where}")
    for column in ("run", "started", "status", "attempts", "ok", "cases", "commit", "source"):
        table.add_column(column, no_wrap=column in ("run", "started"))
    for r in rows:
        commit = (r.get("accelbench_commit") or "")[:10]
        cells = (r["run_id"], r["started_at"], _status(r, host), str(r["attempts"]), str(r["ok"] or 0),
                 r.get("case_names") or "", commit, r["source"])
        table.add_row(*map(Text, cells))  # a store's (a bundle's, an import's): text, never markup
    console.print(table)
    return EXIT_OK


def _status(run: dict, host: str) -> str:
    """A running run says where: one on another host cannot be checked from here."""
    if run["status"] != "running" or not run.get("orchestrator_pid"):
        return run["status"]
    if run.get("orchestrator_host") != host:
        return f"running (on {run.get('orchestrator_host')}: not checked from here)"
    alive = process_alive(run["orchestrator_pid"], run.get("orchestrator_started"))
    return f"running (pid {run['orchestrator_pid']})" if alive else "running (orchestrator gone)"


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    with open_store(args) as store:
        run_id = store.resolve_run(args.run)
        run = store.run(run_id)
        attempts = store.attempts(run_ids=[run_id])
        allreduce = [a.row for a in store.attempts({"case": "allreduce", "status": "ok"})] \
            if any((a.row.get("nnodes") or 1) > 1 for a in attempts) else []
    console.print(f"[bold]run {escape(str(run_id))}[/] " + escape(f"({run['source']}) {run['status']}: "
                  f"{run['started_at']} -> {run.get('ended_at') or '(not ended)'}"), soft_wrap=True)  # a bundle's
    if run.get("argv"):
        console.print(f"  command: {' '.join(run['argv'])}", markup=False, soft_wrap=True)
    dirty = any(((a.row.get("environment") or {}).get("orchestrator") or {}).get("accelbench_dirty")
                for a in attempts)  # the tree the numbers came from was not that commit's
    console.print(f"  accelbench commit: {run.get('accelbench_commit')}"
                  f"{' (with uncommitted changes to tracked files)' if dirty else ''}; logs: {run.get('log_dir')}",
                  markup=False, soft_wrap=True)
    if run.get("orchestrator_pid"):
        console.print(f"  orchestrator: pid {run['orchestrator_pid']} on {run.get('orchestrator_host')}",
                      markup=False, soft_wrap=True)
    if run.get("note"):
        console.print(f"  note: {run['note']}", markup=False, soft_wrap=True)
    for a in attempts:
        show_record(console, a.record(), a["attempt"], a, allreduce, verbose=getattr(args, "verbose", False))
    return EXIT_OK


def show_record(console: Console, r, attempt: int, columns, allreduce: Sequence[dict] = (),
                verbose: bool = False) -> None:
    """One round record: status, the headline figures (the store's columns, derived from it), task figures,
    how clean its measurement was (contention, the rate's noise), warnings, error lines and where each node
    ran; ``verbose``: who else used the machine (pids)."""
    console.print(f"\n[bold]{escape(r.case_name)}[/] round {r.round} attempt {attempt}: {r.status.value}"
                  + (f" — {escape(r.reason)}" if r.reason else ""), soft_wrap=True)
    if r.case.extern_config:
        console.print(f"  extern config: {r.case.extern_config} (sha256 {str(r.case.extern_config_hash)[:12]})",
                      markup=False, soft_wrap=True)
    if r.workload_hash:
        console.print(f"  workload: {r.workload_hash}", markup=False)
    _show_compliance(console, r)
    if r.device_definition is not None:  # what every per-device figure below divides by
        console.print(f"  device: {r.device_definition.words()}", markup=False, soft_wrap=True)
    for figure in FIGURE_BY_KEY.values():
        if figure.key == "peak_memory_bytes":
            _show_memory(console, r, columns)  # in its place, in the definition every view shows
            continue
        value = sources.value(columns, figure.key) if figure.key != "wall_time_s" else columns.get(figure.key)
        if value is not None:
            said = sources.source(r.metrics, figure.key)  # an import's: where the figure comes from
            if figure.key in WINDOWED and (r.monitor or {}).get("window") == WHOLE_ROUND:
                said = "over the whole round: no monitor sample fell inside the measured steps"
            console.print(f"  {figure.label}: {figure.fmt(value)}" + (f" — {said}" if said else ""),
                          markup=False, soft_wrap=True)
    for line in measurement_lines(r, verbose):
        console.print(f"  {line}", markup=False, soft_wrap=True)
    for line in sources.logged_lines(r.metrics):  # what the imported tool logged itself, beside ours
        console.print(f"  {line}", markup=False, soft_wrap=True)
    for line in describe_breakdown((r.metrics or {}).get("time_breakdown")):
        console.print(f"  {line}", markup=False, soft_wrap=True)
    interconnect = interconnect_line(columns.row, allreduce)
    if interconnect:
        console.print(f"  {interconnect}", markup=False, soft_wrap=True)
    views, rest = micro_views([f.model_dump() for f in r.figures])  # micro-benchmarks' own tables; PPO phases
    for view in views:
        console.print(to_rich(view))
    for figure in rest:
        console.print(f"  {figure.key}: {figure.value:,.4g} {figure.unit}", markup=False, soft_wrap=True)
    for warning in r.warnings:
        console.print(f"  [yellow]warning[/] {escape(warning)}", soft_wrap=True)
    for line in r.error_lines:
        console.print(f"    {line}", markup=False, soft_wrap=True)
    for node in r.environment.nodes:
        env = node.get("environment") or {}
        facts = ", ".join(f"{k}={env[k]}" for k in sorted(env) if not isinstance(env[k], (dict, list)))
        console.print(f"  node {node.get('node_rank')} ({node.get('host')}): {facts}", markup=False, soft_wrap=True)
        if node.get("image"):
            console.print(f"    image: {node['image']} ({node.get('image_id')})", markup=False, soft_wrap=True)
        for key, value in sorted((node.get("probes") or {}).items()):
            first = str(value).splitlines()[0] if value else ""
            console.print(f"    {key}: {first}", markup=False, soft_wrap=True)
    if r.results_path:
        console.print(f"  results: {r.results_path}", markup=False, soft_wrap=True)


def _show_compliance(console: Console, r) -> None:
    """The round's verdict against its case's policy: compliant (with the policy files), or each departure."""
    verdict = r.compliance
    if verdict is None:
        console.print("  policy: not judged (an import, or a round from before policies)", markup=False)
    elif verdict.compliant:
        console.print(f"  policy: compliant ({', '.join(verdict.policy)})", markup=False, soft_wrap=True)
    else:
        console.print(f"  policy: [red]{NON_COMPLIANT.upper()}[/] with its case's policy "
                      f"({escape(', '.join(verdict.policy))})", soft_wrap=True)
        for departure in verdict.departures:
            console.print(f"    departs: {departure.sentence()}", markup=False, soft_wrap=True)


def measurement_lines(r, verbose: bool = False) -> list[str]:
    """How clean the round's measurement was: its contention verdict and the noise of its rate; verbose, who
    the others were (pids) and other runs' leftovers found at the start."""
    out = []
    if r.source == "accelbench" and r.status.value == "ok":
        out.append(f"contention: {contention.line(contention.of(r.monitor))}")
    rate = (r.metrics or {}).get("rate_noise") or {}
    if rate.get("interval95"):
        low, high = rate["interval95"]
        out.append(f"noise of the rate: 95 % interval {low:+.1%} .. {high:+.1%} from its {rate['steps']} steps "
                   f"resampled (step time CV {rate['step_time_cv']:.1%})")
    elif rate.get("why"):
        out.append(f"noise of the rate: unknown ({rate['why']})")
    if verbose:
        out += [f"  {line}" for line in contention.verbose_lines(contention.of(r.monitor))]
        for group in getattr(r.environment, "leftovers", None) or []:
            out.append(f"  another run's processes at the start on {group.get('host')}: run {group.get('run') or '?'}"
                       f", pids {', '.join(map(str, group.get('pids') or []))}: {group.get('cmd', '')}")
    return out


def _show_memory(console: Console, r, columns) -> None:
    """The memory figure the run's table and ``report`` show for this round (results/figures/memory.py), named, then
    the round's other memory figures, each named, so no two views disagree on an unnamed "peak memory"."""
    found = memory.figures(lambda key: sources.value(columns, key), (r.metrics or {}).get("memory_kind"))
    total = columns.get("memory_total_bytes")
    for i, figure in enumerate(found):
        said = sources.source(r.metrics, figure.key) if figure.key == "peak_memory_bytes" else None
        head = (f"  memory/device: {human_bytes(figure.value)}" + (f" / {human_bytes(total)}" if total else "")
                if i == 0 else f"    also {figure.name}: {human_bytes(figure.value)}")
        console.print(f"{head} ({figure.label})" + (f" — {said}" if said else ""), markup=False, soft_wrap=True)
    if total and not found:
        console.print(f"  device memory total: {human_bytes(total)}", markup=False)

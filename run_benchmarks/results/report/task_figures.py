"""A round's task figures (perf records of kind ``figure``: an RLHF PPO round's phases, a micro-benchmark's
sizes) as tables.

``accelbench show`` prints them from the store (``micro_views``): micro-benchmark figures as the tables their
fields make (bandwidth against message size per collective, TFLOP/s per GEMM size and precision, STREAM
bandwidth per array size), any other figure one row each. ``python -m run_benchmarks.results.report.task_figures
ROUND_DIR [--format markdown]`` reads them straight from a round's rank logs, combined per round as
``run_benchmarks.figures`` does.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from rich.console import Console

from training.contract.tasks import task_of

from run_benchmarks.results.worker_logs.rank_files import gathered
from run_benchmarks.results.worker_logs.rank_logs import read_rank
from run_benchmarks.results.figures.task import Figure, figures_from_dicts, round_figures
from run_benchmarks.results.report.summary import human_bytes, number
from run_benchmarks.results.report.views import View, to_markdown, to_rich


def round_dir_figures(round_dir: Path) -> list[Figure]:
    """Every rank's figures under ``round_dir`` (its node folders), combined over the ranks."""
    return round_figures([read_rank(rank_logs) for rank_logs in gathered(round_dir)])


def figures_view(title: str, figures: Sequence[Figure]) -> View:
    """One row per figure; each formula once, as a note the rows point to ([1], [2] ...)."""
    formulas = list(dict.fromkeys(f.formula for f in figures if f.formula))
    rows = [[f.key, number(f.value), f.unit, f"{f.ranks} rank(s)",
             f"[{formulas.index(f.formula) + 1}]" if f.formula else ""] for f in figures]
    notes = [f"[{i}] {formula}" for i, formula in enumerate(formulas, 1)]
    return View(title, ["figure", "value", "unit", "from", "formula"], rows, notes)


COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv")
_STREAM = ("copy", "triad", "h2d", "d2h")


def _notes(figures: Sequence[Figure]) -> list[str]:
    return list(dict.fromkeys(f"{f.name}: {f.formula}" for f in figures if f.formula))


def collective_view(op: str, figures: Sequence[Figure]) -> Optional[View]:
    """nccl-tests' table: one row per message size, the slowest rank's time, algbw and busbw."""
    rows: dict[int, dict[str, Figure]] = {}
    for f in figures:
        if f.name.startswith(f"{op}.") and f.params and "bytes" in f.params:
            rows.setdefault(int(f.params["bytes"]), {})[f.name.split(".", 1)[1]] = f
    if not rows:
        return None
    ranks = sorted({str(f.params.get("ranks")) for r in rows.values() for f in r.values()})
    body = [[str(size), human_bytes(size), _value(row, "time_s", 1e6), _value(row, "algbw_gbps"),
             _value(row, "busbw_gbps")] for size, row in sorted(rows.items())]
    return View(f"{op}: bandwidth against message size ({'/'.join(ranks)} ranks)",
                ["bytes", "size", "time (us)", "algbw (GB/s)", "busbw (GB/s)"], body,
                _notes([f for row in rows.values() for f in row.values()]))


def gemm_view(figures: Sequence[Figure]) -> Optional[View]:
    """One row per precision and (M, N, K): time and TFLOP/s; the best per precision marked."""
    rows: dict[tuple, dict[str, Figure]] = {}
    best = {f.params["dtype"]: f.value for f in figures if f.name == "gemm.best_tflops" and f.params}
    for f in figures:
        if f.name in ("gemm.time_s", "gemm.tflops") and f.params:
            key = (f.params["dtype"], f.params["m"], f.params["n"], f.params["k"])
            rows.setdefault(key, {})[f.name.split(".", 1)[1]] = f
    if not rows:
        return None
    body = [[dtype, str(m), str(n), str(k), _value(row, "time_s", 1e3), _value(row, "tflops"),
             "best" if "tflops" in row and row["tflops"].value == best.get(dtype) else ""]
            for (dtype, m, n, k), row in rows.items()]
    return View("GEMM: TFLOP/s per size and precision", ["dtype", "M", "N", "K", "time (ms)", "TFLOP/s", ""],
                body, _notes([f for row in rows.values() for f in row.values()]))


def membw_view(figures: Sequence[Figure]) -> Optional[View]:
    """STREAM-style bandwidth per array size; the launch latency, where a device measured one, as a note."""
    rows: dict[int, dict[str, Figure]] = {}
    for f in figures:
        if f.name.startswith("membw.") and f.name.endswith("_gbps") and f.params:
            rows.setdefault(int(f.params["bytes"]), {})[f.name[len("membw."):-len("_gbps")]] = f
    if not rows:
        return None
    kernels = [k for k in _STREAM if any(k in row for row in rows.values())]
    body = [[human_bytes(size), *(_value(row, k) for k in kernels)] for size, row in sorted(rows.items())]
    notes = _notes([f for row in rows.values() for f in row.values()])
    notes += [f"launch latency: {number(f.value)} {f.unit} ({f.formula})" for f in figures
              if f.name == "launch.latency_us"]
    return View("memory bandwidth per array size (GB/s)", ["bytes per array", *kernels], body, notes)


def _value(row: dict[str, Figure], field: str, scale: float = 1.0) -> str:
    return number(row[field].value * scale) if field in row else ""


def micro_views(items: Sequence[dict]) -> tuple[list[View], list[Figure]]:
    """A stored attempt's figures (its ``figures`` column): the micro-benchmarks' as their tables, and the
    figures that are no micro-benchmark's (PPO phases), left for one line each."""
    figures = figures_from_dicts(items)
    views = [gemm_view(figures), membw_view(figures), *(collective_view(op, figures) for op in COLLECTIVES)]
    micro_names = ("gemm.", "membw.", "launch.", *(f"{op}." for op in COLLECTIVES))
    return [v for v in views if v is not None], [f for f in figures if not f.name.startswith(micro_names)]


def hosts_of(row: dict) -> frozenset[str]:
    """The hosts an attempt ran on, as its nodes reported them (the worker's hostname, else the cluster's name)."""
    nodes = (row.get("environment") or {}).get("nodes") or []
    return frozenset((node.get("environment") or {}).get("hostname") or str(node.get("host")) for node in nodes)


def interconnect_line(row: dict, allreduce_rows: Sequence[dict]) -> Optional[str]:
    """For a training attempt on several nodes: the all-reduce bus bandwidth last measured (an ``allreduce``
    case, ok) on exactly its hosts, at the largest message size, so a reader sees whether the network limits
    it. None for one node, a micro case, or hosts never measured."""
    if (row.get("nnodes") or 1) < 2 or not task_of((row.get("workload") or {}).get("task") or "pretrain").trains:
        return None
    hosts = hosts_of(row)
    measured = [r for r in allreduce_rows if r.get("status") == "ok" and hosts_of(r) == hosts and r.get("figures")]
    if not measured:
        return None
    last = measured[-1]
    busbw = [f for f in figures_from_dicts(last["figures"]) if f.name == "allreduce.busbw_gbps" and f.params]
    if not busbw:
        return None
    largest = max(busbw, key=lambda f: f.params["bytes"])
    return (f"all-reduce busbw measured on these hosts: {number(largest.value)} {largest.unit} at "
            f"{human_bytes(largest.params['bytes'])} ({last['case_name']}, run {last['run_id']})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("round_dir", type=Path, help="a round's folder (holds the node folders)")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args(argv)
    views, rest = micro_views([f.to_dict() for f in round_dir_figures(args.round_dir)])
    if rest:
        views.append(figures_view(f"task figures of {args.round_dir} (warm-up excluded)", rest))
    for view in views:
        if args.format == "markdown":
            print(to_markdown(view))
        else:
            Console().print(to_rich(view))


if __name__ == "__main__":
    main()

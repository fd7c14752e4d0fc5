#!/usr/bin/env python3
"""What does the orchestrator cost a run? ``accelbench run`` beside a bare torchrun of the same training.

(a) ``accelbench run gpt2_tiny:torch:cpu:1:2 --set ...``: the whole command (plan, preflight, guards, the
    monitor, polling and live progress, collection, analysis, the store); tokens/s from its results.json;
(b) the torchrun command line the orchestrator would start, with the worker config it would write (both
    taken from the run's own plan: ``build_run_plan`` and ``rounds.write_inputs``), started the way the
    local host starts it (own session, the node's environment, output to a log file), and nothing else:
    no orchestrator, no monitor, no guard. Its tokens/s read from the rank logs by the orchestrator's own
    code (the launcher's ``gather_rank_logs``, ``read_ranks``, ``round_metrics``), so both figures are computed alike.

Only the orchestrator differs: same launcher flags, same worker config, so (b) runs the breakdown steps
(``train.breakdown_steps``) after its measured steps as (a) does. Wall time is from starting the command
to its exit. Pairs run interleaved, the order flipped every pair (a b, b a, ...), so drift of the machine
and any first-or-second effect hit both alike; ratios are of medians. Goals (issue 29): wall(a)/wall(b)
at most 1.05, tokens/s(a)/tokens/s(b) at least 0.99.

``--cpu`` also samples, every 0.2 s, the CPU time of every process of each side (psutil, the command's
whole tree: orchestrator, guards, monitor, torchrun agent, ranks) and prints, per kind of process, its CPU
seconds over the whole command and its share of a core while the ranks' measured steps ran (the window
their step records span). The sampling costs CPU itself, on both sides alike: leave it off for the ratios.

    python benchmarks/run_vs_torchrun.py                     # 5 pairs, ~25 s a run
    python benchmarks/run_vs_torchrun.py --pairs 1 --cpu --set train.steps=20   # a smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASE = "gpt2_tiny:torch:cpu:1:2"
# gpt2_tiny 1x2 takes ~0.13 s a step on this 2-core VM: ~20 s of steps and ~8 s of start and end.
DEFAULT_SETTINGS = ("train.steps=150", "train.warmup_steps=10")
SAMPLE_S = 0.2
KINDS = (("run_benchmarks.cli", "orchestrator"), ("training.monitor", "monitor"),
         ("torch.distributed.run", "torchrun agent"), ("training.run_pretraining", "ranks"))


def kind_of(cmdline: list[str]) -> str:
    if cmdline[1:2] == ["-c"] and "guard" in cmdline[3:4]:  # hosts/reaper.py's guard_argv
        return "guards"
    text = " ".join(cmdline)
    return next((kind for needle, kind in KINDS if needle in text), "other")


class CpuSampler:
    """CPU seconds (user + system) of every process under ``root``, sampled on a thread: per pid its last
    reading, and (wall clock, per-kind total) at each sample, to read a window's share afterwards."""

    def __init__(self, root: int):
        import psutil

        self.psutil, self.root = psutil, psutil.Process(root)
        self.last: dict[int, tuple[str, float]] = {}
        self.series: list[tuple[float, dict[str, float]]] = []
        self.agent: tuple[float, float] | None = None  # the torchrun agent's start and last sighting (wall clock)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except self.psutil.NoSuchProcess:
                return
            for proc in procs:
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        kind = self.last[proc.pid][0] if proc.pid in self.last else kind_of(proc.cmdline())
                        # children's times are the exited children's: counted once, at their parent
                        self.last[proc.pid] = (kind, times.user + times.system)
                        if kind == "torchrun agent":
                            self.agent = (self.agent or (proc.create_time(),))[0], time.time()
                except (self.psutil.NoSuchProcess, self.psutil.AccessDenied, self.psutil.ZombieProcess):
                    pass
            self.series.append((time.time(), self.totals()))

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, seconds in self.last.values():
            out[kind] = out.get(kind, 0.0) + seconds
        return out

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()

    def share(self, window: tuple[float, float] | None) -> dict[str, float]:
        """Per kind, the cores it used between the samples nearest the window's ends."""
        inside = [s for s in self.series if window and window[0] <= s[0] <= window[1]]
        if len(inside) < 2:
            return {}
        (t0, first), (t1, last) = inside[0], inside[-1]
        return {kind: (last.get(kind, 0.0) - first.get(kind, 0.0)) / (t1 - t0) for kind in last}


def timed(argv: list[str], env: dict, log: Path, cpu: bool) -> tuple[float, CpuSampler | None]:
    began, began_wall = time.perf_counter(), time.time()
    with open(log, "ab") as sink:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        sampler = CpuSampler(process.pid) if cpu else None
        code = process.wait()
    wall = time.perf_counter() - began
    if sampler:
        sampler.stop()
        sampler.before_after = (sampler.agent[0] - began_wall, began_wall + wall - sampler.agent[1]) \
            if sampler.agent else None
    if code != 0:
        raise SystemExit(f"{argv[:4]}... exited with {code}; its output: {log}")
    return wall, sampler


def through_accelbench(settings: list[str], work: Path, cpu: bool, case: str = CASE, options: tuple = ()) -> dict:
    """One fresh ``accelbench run case --set ...`` (``options``: more of its command line, e.g. --test-conf)."""
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", case, "--log-root", str(work / "a"), *options]
    for setting in settings:
        argv += ["--set", setting]
    (work / "a").mkdir(parents=True, exist_ok=True)
    wall, sampler = timed(argv, {**os.environ, "PYTHONPATH": str(ROOT)}, work / "a.log", cpu)
    results = max((work / "a").glob("*/*/round1/results.json"), key=lambda p: p.stat().st_mtime)
    document = json.loads(results.read_text())
    window = _window(results.parent)
    return {"wall_s": wall, "tokens_per_s": document["metrics"]["tokens_per_s_total"],
            "warmup_steps": document["metrics"]["warmup_steps"], "cpu": _cpu(sampler, window)}


def bare_torchrun(settings: list[str], work: Path, cpu: bool) -> dict:
    from run_benchmarks.execute.rounds import write_inputs
    from run_benchmarks.planner.build import build_run_plan
    from run_benchmarks.planner.inputs import default_root, load_inputs

    from training.contract import ports

    plan = build_run_plan(load_inputs(default_root()), [CASE], "bare", work / "b", assignments=tuple(settings))
    case = plan.cases[0]
    rnd = case.rounds[0]
    node = rnd.nodes[0]
    write_inputs(case, rnd)  # the worker config and resolved.yaml, as the orchestrator writes them
    (node.log_dir / "tmp").mkdir(parents=True, exist_ok=True)
    argv = ports.filled(node.argv, ports.free_ports(1)[0])  # master_port auto: chosen here, where it starts
    wall, sampler = timed(argv, {**os.environ, **node.env}, node.launcher_log, cpu)
    from run_benchmarks.results.figures.analyze import round_metrics
    from run_benchmarks.results.worker_logs.rank_logs import read_ranks

    from run_benchmarks.backends import launchers

    ranks = list(read_ranks(launchers.of(case).gather_rank_logs(node.log_dir, 0, case.name.nprocs_per_node)))
    window = _span([r.series.window for r in ranks])
    metrics = round_metrics(ranks, None, "")
    return {"wall_s": wall, "tokens_per_s": metrics.tokens_per_s_total, "cpu": _cpu(sampler, window)}


def _window(round_dir: Path) -> tuple[float, float] | None:
    from run_benchmarks.results.worker_logs.rank_logs import gathered, read_ranks

    return _span([r.series.window for r in read_ranks(gathered(round_dir))])


def _span(windows: list) -> tuple[float, float] | None:
    windows = [w for w in windows if w]
    return (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else None


def _cpu(sampler: CpuSampler | None, window) -> dict:
    if sampler is None:
        return {}
    return {"total_s": sampler.totals(), "cores_in_steps": sampler.share(window),
            "around_torchrun_s": sampler.before_after}


def _print_cpu(label: str, runs: list[dict]) -> None:
    around = [r["cpu"]["around_torchrun_s"] for r in runs if r["cpu"].get("around_torchrun_s")]
    if around:
        print(f"  {label:<10} before torchrun started {statistics.median(a[0] for a in around):.2f} s, after it "
              f"was last seen {statistics.median(a[1] for a in around):.2f} s (+-{SAMPLE_S} s)")
    kinds = sorted({k for r in runs for k in r["cpu"].get("total_s", {})})
    for kind in kinds:
        total = statistics.median(r["cpu"]["total_s"].get(kind, 0.0) for r in runs)
        shares = [r["cpu"]["cores_in_steps"].get(kind) for r in runs if r["cpu"].get("cores_in_steps")]
        share = f"{statistics.median(s or 0.0 for s in shares):.3f}" if shares else "n/a"
        print(f"  {label:<10} {kind:<15} {total:7.2f} CPU s in all, {share} cores during the measured steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help=f"workload overrides, given to both sides (default: {' '.join(DEFAULT_SETTINGS)})")
    parser.add_argument("--cpu", action="store_true", help="sample each process's CPU time (costs CPU itself)")
    args = parser.parse_args()
    if args.pairs < 1:
        raise SystemExit("--pairs: give 1 or more")
    settings = list(args.settings or DEFAULT_SETTINGS)
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="run_vs_torchrun.") as tmp:
        for pair in range(1, args.pairs + 1):
            for which in (("a", "b") if pair % 2 else ("b", "a")):
                work = Path(tmp) / f"pair{pair}"
                run = through_accelbench if which == "a" else bare_torchrun
                runs[which].append(run(settings, work, args.cpu))
            a, b = runs["a"][-1], runs["b"][-1]
            print(f"pair {pair}: accelbench {a['wall_s']:.2f} s {a['tokens_per_s']:,.0f} tok/s; bare torchrun "
                  f"{b['wall_s']:.2f} s {b['tokens_per_s']:,.0f} tok/s; wall ratio {a['wall_s'] / b['wall_s']:.3f}, "
                  f"tok/s ratio {a['tokens_per_s'] / b['tokens_per_s']:.3f}", flush=True)
    wall_a, wall_b = (statistics.median(r["wall_s"] for r in runs[w]) for w in "ab")
    tps_a, tps_b = (statistics.median(r["tokens_per_s"] for r in runs[w]) for w in "ab")
    print(f"{CASE} with {' '.join(settings)}; {os.cpu_count()} CPU(s), {args.pairs} pairs, "
          f"load average before the end {os.getloadavg()[0]:.2f}")
    print(f"median wall: accelbench {wall_a:.2f} s, bare torchrun {wall_b:.2f} s; ratio {wall_a / wall_b:.3f} "
          "(goal <= 1.05)")
    print(f"median tokens/s: accelbench {tps_a:,.0f}, bare torchrun {tps_b:,.0f}; ratio {tps_a / tps_b:.3f} "
          "(goal >= 0.99)")
    if args.cpu:
        print("CPU by process kind (medians over the runs):")
        _print_cpu("accelbench", runs["a"])
        _print_cpu("bare", runs["b"])


if __name__ == "__main__":
    main()

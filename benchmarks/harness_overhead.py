#!/usr/bin/env python3
"""How much does accelbench cost? Tokens/s of one model and batch, measured two ways, in one invocation.

(a) through accelbench: ``accelbench run <case>:torch:cpu:1:1`` (torchrun, the
    instrumented loop, perf records), reading tokens/s from results.json;
(b) a bare loop: torch and the model class only (the workload under test) - no
    launcher, no orchestrator, no perf records, no per-step synchronisation -
    timed once around all steps after the same warm-up.

torchrun starts every worker in a session of its own, and with the kernel's
scheduler autogroups (on by default) a session is a CPU group of its own, which
gets a different share of the cores than a plain child whenever anything else
runs. The bare loop is therefore started in a session of its own too, so both
sides are scheduled alike and the ratio is accelbench's own cost.

Pairs run interleaved, and the order flips every pair (a b, b a, a b, ...), so
drift of the machine and any first-or-second effect hit both alike; the ratio
is median(a) / median(b). Goal: at least 0.98.

First, in the same run, the start-up: wall time of ``accelbench --help`` and ``accelbench list`` (each a
fresh interpreter, ``python -m run_benchmarks.cli``) beside a bare ``python -c pass``, median of
``--startup-repeats`` interleaved calls. Goal: at most 0.3 s each.

    python benchmarks/harness_overhead.py [--pairs 3] [--set train.steps=40 ...]
    python benchmarks/harness_overhead.py --pairs 0          # the start-up figures only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# A model a little bigger than gpt2_tiny, so a step takes long enough (~0.1 s) to time well on a CPU.
DEFAULT_SETTINGS = ("model.n_layer=4", "model.d_model=256", "model.seq_len=256", "train.micro_batch_size=8",
                    "train.steps=40", "train.warmup_steps=5")


def bare_loop(spec_json: str) -> None:
    """Runs in a child process: the training step and nothing else."""
    import torch

    from training.contract.spec import WorkloadSpec
    from training.torch.model import GPT

    spec = WorkloadSpec.model_validate_json(spec_json)
    torch.manual_seed(spec.train.seed)
    model = GPT(spec.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, weight_decay=spec.train.weight_decay)
    generator = torch.Generator().manual_seed(spec.train.seed)
    batch, seq = spec.train.micro_batch_size, spec.model.seq_len

    def step() -> None:
        tokens = torch.randint(0, spec.model.vocab_size, (batch, seq + 1), generator=generator)
        loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(spec.train.warmup_steps):
        step()
    measured = spec.train.steps - spec.train.warmup_steps
    step_times = []  # a clock read per step costs nanoseconds; on a CPU there is nothing to synchronise
    started = time.perf_counter()
    for _ in range(measured):
        before = time.perf_counter()
        step()
        step_times.append(time.perf_counter() - before)
    elapsed = time.perf_counter() - started
    print(json.dumps({"tokens_per_s": measured * batch * seq / elapsed,
                      "step_time_median_s": statistics.median(step_times)}))


def resolve_workload(case: str, settings: list[str]) -> str:
    from run_benchmarks.planner.inputs import default_root, load_inputs
    from run_benchmarks.planner.build import build_run_plan

    plan = build_run_plan(load_inputs(default_root()), [f"{case}:torch:cpu:1:1"], "bench", Path("/nonexistent"),
                          assignments=tuple(settings))
    return plan.cases[0].workload.model_dump_json()


def through_accelbench(case: str, settings: list[str], log_root: Path) -> dict:
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", f"{case}:torch:cpu:1:1", "--log-root", str(log_root)]
    for setting in settings:
        argv += ["--set", setting]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"accelbench run failed:\n{done.stderr}\n{done.stdout}")
    newest = max(log_root.glob("*/*/round1/results.json"), key=lambda p: p.stat().st_mtime)
    metrics = json.loads(newest.read_text())["metrics"]
    return {"tokens_per_s": metrics["tokens_per_s_total"], "step_time_median_s": metrics["step_time_s"]["median"]}


def bare(spec_json: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--bare-child", spec_json], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    if done.returncode != 0:
        raise SystemExit(f"bare loop failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


STARTUP = {"python -c pass": ["-c", "pass"], "accelbench --help": ["-m", "run_benchmarks.cli", "--help"],
           "accelbench list": ["-m", "run_benchmarks.cli", "list"]}


def startup(repeats: int) -> dict[str, float]:
    """Median wall seconds of each STARTUP command, the commands taking turns so drift hits all alike."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times: dict[str, list[float]] = {name: [] for name in STARTUP}
    for _ in range(repeats):
        for name, argv in STARTUP.items():
            began = time.perf_counter()
            subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - began)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="gpt2_tiny")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help=f"workload overrides (default: {' '.join(DEFAULT_SETTINGS)})")
    parser.add_argument("--startup-repeats", type=int, default=10, help="calls of each start-up command (10)")
    parser.add_argument("--bare-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_child:
        bare_loop(args.bare_child)
        return
    figures = startup(args.startup_repeats)
    print(f"start-up, median of {args.startup_repeats} on {os.cpu_count()} CPU(s): "
          + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in figures.items()) + " (goal <= 0.3 s)",
          flush=True)
    if args.pairs < 1:
        return
    settings = list(args.settings or DEFAULT_SETTINGS)
    spec_json = resolve_workload(args.case, settings)
    harness, plain = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(1, args.pairs + 1):
            order = ("a", "b") if pair % 2 else ("b", "a")
            for which in order:
                if which == "a":
                    harness.append(through_accelbench(args.case, settings, Path(tmp)))
                else:
                    plain.append(bare(spec_json))
            print(f"pair {pair}: accelbench {harness[-1]['tokens_per_s']:,.0f} tok/s, "
                  f"bare loop {plain[-1]['tokens_per_s']:,.0f} tok/s", flush=True)
    a, b = (statistics.median(r["tokens_per_s"] for r in runs) for runs in (harness, plain))
    sa, sb = (statistics.median(r["step_time_median_s"] for r in runs) for runs in (harness, plain))
    print(f"case {args.case} with {' '.join(settings)}; 1 process on {os.cpu_count()} CPU(s), {args.pairs} pairs")
    print(f"median tokens/s: accelbench {a:,.0f}, bare loop {b:,.0f}; ratio {a / b:.3f} (goal >= 0.98)")
    print(f"median step time: accelbench {sa * 1e3:.1f} ms, bare loop {sb * 1e3:.1f} ms; "
          f"throughput ratio by step time {sb / sa:.3f}")


if __name__ == "__main__":
    main()

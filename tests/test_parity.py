"""Every strategy trains the same model: its losses equal one process's over the first steps.

Same seed, same data (samples are drawn per global index, so the ranks
together see exactly the one process's batch), fp32. Each step's loss is the
mean over the global batch's supervised tokens, so padded instruction batches
of different widths on different ranks compare too. Tolerances (TOLERANCE,
GRAD_NORM_TOLERANCE below, with what was measured): the order of
floating-point reductions may differ, nothing else.

One launch per world size (1, 2, 4), not one run per strategy: each strategy is
planned by the orchestrator from its case name and ``--set`` settings exactly as
``accelbench run`` plans it, and all strategies of a world size are trained in
turn by the real worker entry under one torchrun, in one gloo process group
(``tests/parity_launch.py``, ``tests/parity_worker.py``). The world-1 launch
holds compile first (nothing eager before it in the process, as in a run), then
the one-process references, one per (model, model settings), and full
recompute, with one OpenMP thread (see ONE_THREAD). Each strategy is still its
own test, named after it. ``test_each_launch_kept_its_temporary_files_in_the_run_folder``
keeps the check each CLI run used to make: the launcher and the compiler write
nothing to the TMPDIR they were started with, only to the run folder the plan
gives them.

The world-4 launch also times FSDP2 beside tensor parallel (BREAKDOWN: a
collective delay, breakdown steps after the 4 compared steps, which a sleep
and later steps cannot change): ``test_fsdp_beside_tensor_parallel_times_both_with_their_own_groups``,
formerly a spawn of four ranks of its own in tests/test_breakdown_tp.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from training.contract import perflog

from .conftest import ROOT
from .runner import ends_with_the_test
from .parity_launch import Launch, Run, launch

# Measured on 2026-11-24 over every comparison in this file and tests/test_paddle.py (ACCELBENCH_PARITY_REPORT):
# losses differ by at most 9.5e-7 (2 float32 ulps at 6.9), gradient norms by at most 1.9e-6 relative (Paddle;
# PyTorch strategies 1.7e-7). The tolerances sit ~5x above that, and ~80x below a known sequence-parallel bug
# (norm gradients not all-reduced: 4e-4 on the loss).
TOLERANCE = 5e-6  # absolute, on losses near ln(vocab)
GRAD_NORM_TOLERANCE = 1e-5  # relative: AdamW hardly reacts to a constant gradient scale, so losses alone
#                             would not catch a wrong one (e.g. a pipeline's 1/n_microbatches twice)
PARITY_REPORT = "ACCELBENCH_PARITY_REPORT"  # a file: each comparison appends its largest differences


def assert_trajectories_match(got: list[tuple[float, float]], want: list[tuple[float, float]], label: str,
                              norms: bool = True) -> None:
    """Losses within TOLERANCE (absolute), and gradient norms within GRAD_NORM_TOLERANCE (relative) where
    ``norms``; with ``$ACCELBENCH_PARITY_REPORT`` set, the largest differences are appended to that file
    (how the tolerances above were measured: see the module docstring)."""
    assert len(got) == len(want) and got, f"{label}: {len(got)} steps vs {len(want)}"
    loss_diff = max(abs(g[0] - w[0]) for g, w in zip(got, want))
    norm_diff = max(abs(g[1] - w[1]) / w[1] for g, w in zip(got, want)) if norms else None
    if os.environ.get(PARITY_REPORT):
        with open(os.environ[PARITY_REPORT], "a", encoding="utf-8") as f:
            f.write(json.dumps({"label": label, "loss_abs": loss_diff, "grad_norm_rel": norm_diff}) + "\n")
    assert loss_diff <= TOLERANCE, f"{label}: losses {[g[0] for g in got]} vs {[w[0] for w in want]}"
    if norms:
        assert all(g[1] is not None for g in got), f"{label}: the worker reported no gradient norm"
        assert norm_diff <= GRAD_NORM_TOLERANCE, \
            f"{label}: gradient norms {[g[1] for g in got]} vs {[w[1] for w in want]}"


COMMON = ("train.steps=4", "train.warmup_steps=1", "train.lr=1e-3")
# This file's launches add no time-breakdown steps: with one warm-up step they would run after the 4 steps
# compared (training/breakdown.py), so they change no loss compared here, and each layout's breakdown is tested
# on its own (test_breakdown_*). 3 more serialised steps per strategy were ~10 % of this file's CPU.
LAUNCH_COMMON = (*COMMON, "train.breakdown_steps=0")
# Except FSDP2 beside TP2, whose breakdown needs four ranks, as its parity does: its launch's settings add a
# delay before every collective (a sleep: no loss changes) and 3 breakdown steps after the compared ones.
FSDP_DELAY_MS = 100.0
BREAKDOWN = {"fsdp_stage3_x_tensor_parallel": ("train.breakdown_steps=3", f"debug.collective_delay_ms={FSDP_DELAY_MS}")}


def losses(log_root: Path, case_name: str, *settings: str, cli_args: tuple[str, ...] = ()) -> list[float]:
    return [loss for loss, _ in trajectory(log_root, case_name, *settings, cli_args=cli_args)]


def trajectory(log_root: Path, case_name: str, *settings: str,
               cli_args: tuple[str, ...] = ()) -> list[tuple[float, float]]:
    """(loss, gradient norm) per step, from rank 0's perf records, of one whole ``accelbench run`` (a subprocess):
    for what a launch of several strategies cannot hold (tests/test_paddle.py's two Paddle nodes)."""
    argv = [sys.executable, "-m", "run_benchmarks.cli", "run", case_name, "--log-root", str(log_root), *cli_args]
    for setting in (*COMMON, *settings):
        argv += ["--set", setting]
    system_tmp = log_root / "system-tmp"
    system_tmp.mkdir(exist_ok=True)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(system_tmp)},
                          preexec_fn=ends_with_the_test())
    assert done.returncode == 0, done.stderr + done.stdout
    assert list(system_tmp.iterdir()) == []  # launcher and compiler kept their files in the run folder
    logs = [*log_root.glob("*/*/round1/*/rank0.stdout.log"), *log_root.glob("*/*/round1/*/rank0.log")]  # torch, paddle
    newest = max(logs, key=lambda p: p.stat().st_mtime)
    records = (perflog.parse_line(line) for line in newest.read_text().splitlines())
    return [(r.loss, r.grad_norm) for r in records if isinstance(r, perflog.StepRecord)]


STRATEGIES = {
    "ddp": ("gpt2_tiny", 2, ("train.micro_batch_size=4",)),
    "zero1": ("gpt2_tiny", 2, ("train.micro_batch_size=4", "parallel.sharding=stage1")),
    "fsdp_stage2": ("gpt2_tiny", 2, ("train.micro_batch_size=4", "parallel.sharding=stage2")),
    "fsdp_stage3": ("llama_tiny", 2, ("train.micro_batch_size=4", "parallel.sharding=stage3")),
    "fsdp_stage3_offload": ("gpt2_tiny", 2, ("train.micro_batch_size=4", "parallel.sharding=stage3",
                                             "parallel.offload=true")),
    "tensor_parallel_gqa_rotary": ("llama_tiny", 2, ("train.micro_batch_size=8", "parallel.tensor_parallel_degree=2")),
    "tensor_parallel_alibi": ("bloom_tiny", 2, ("train.micro_batch_size=8", "parallel.tensor_parallel_degree=2")),
    "fsdp_stage3_x_tensor_parallel": ("gpt2_tiny", 4, ("train.micro_batch_size=4", "parallel.sharding=stage3",
                                                       "parallel.tensor_parallel_degree=2")),
    "sequence_parallel_gqa_rotary": ("llama_tiny", 2, ("train.micro_batch_size=8", "parallel.tensor_parallel_degree=2",
                                                       "parallel.sequence_parallel=true")),
    "sequence_parallel_alibi": ("bloom_tiny", 2, ("train.micro_batch_size=8", "parallel.tensor_parallel_degree=2",
                                                  "parallel.sequence_parallel=true")),
    # Instruction data: padded batches of different widths per rank, loss over supervised tokens only.
    "finetune_fsdp_stage2_accumulation": ("llama_tiny_sft", 2, ("train.micro_batch_size=2",
                                                                "train.gradient_accumulation_steps=2",
                                                                "parallel.sharding=stage2")),
    "lora_ddp": ("llama_tiny_lora", 2, ("train.micro_batch_size=4",)),
    # Pipelines: the step's micro-batches are its accumulation steps (2 x 4 = the batch of 8).
    "pipeline_1f1b_tied_embeddings": ("gpt2_tiny", 2, ("train.micro_batch_size=2", "train.gradient_accumulation_steps=4",
                                                       "parallel.pipeline_parallel_degree=2")),
    "pipeline_gpipe_alibi": ("bloom_tiny", 2, ("train.micro_batch_size=2", "train.gradient_accumulation_steps=4",
                                               "parallel.pipeline_parallel_degree=2",
                                               "parallel.pipeline_schedule=gpipe")),
    "pipeline_interleaved": ("gpt2_tiny", 2, ("model.n_layer=4", "train.micro_batch_size=2",
                                              "train.gradient_accumulation_steps=4",
                                              "parallel.pipeline_parallel_degree=2",
                                              "parallel.pipeline_schedule=interleaved")),
    "fsdp_stage3_x_pipeline": ("llama_tiny", 4, ("train.micro_batch_size=1", "train.gradient_accumulation_steps=4",
                                                 "parallel.pipeline_parallel_degree=2", "parallel.sharding=stage3")),
    "finetune_pipeline": ("llama_tiny_sft", 2, ("train.micro_batch_size=2", "train.gradient_accumulation_steps=4",
                                                "parallel.pipeline_parallel_degree=2")),
    "ddp_accumulation": ("gpt2_tiny", 2, ("train.micro_batch_size=2", "train.gradient_accumulation_steps=2")),
    "recompute_full": ("llama_tiny", 1, ("train.micro_batch_size=8", "train.recompute=full")),
    "compile": ("gpt2_tiny", 1, ("train.micro_batch_size=8", "train.compile=default")),
    "recompute_selective_zero1": ("gpt2_tiny", 2, ("train.micro_batch_size=4", "train.recompute=selective",
                                                   "parallel.sharding=stage1")),
}


def reference_run(case: str, model_settings: tuple[str, ...]) -> Run:
    """One process, the whole batch of 8, per (case, model settings)."""
    return Run("-".join(("reference", case, *model_settings)), f"{case}:torch:cpu:1:1",
               ("train.micro_batch_size=8", *model_settings))


def model_settings(settings: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in settings if s.startswith("model."))


def compiles(settings: tuple[str, ...]) -> bool:
    return any(s.startswith("train.compile=") for s in settings)


def launch_of(strategy: str) -> str:
    """Which launch trains ``strategy``: its world size's (see runs_of)."""
    return str(STRATEGIES[strategy][1])


# A launch of one process runs with one OpenMP thread, as torchrun starts every rank of a launch of several:
# on a busy 2-core machine, two threads spinning at each barrier made the references 2.5x slower (53 s vs
# 20 s). Compile too: the suite's lanes run every process at one thread (tests/lanes.py), so inductor
# generated its kernels for one thread in a launch of its own as well, which cost a torchrun and a rank's
# imports (~7 s of CPU) more.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def runs_of(key: str) -> tuple[list[Run], dict]:
    """A launch's runs and the environment it starts in: compiled strategies first (nothing eager before them
    in the process, as in a run of their own), then "1"'s references, then the rest in STRATEGIES' order, each
    with its BREAKDOWN settings."""
    runs = [Run(name, f"{case}:torch:cpu:1:{nprocs}", (*settings, *BREAKDOWN.get(name, ())))
            for name, (case, nprocs, settings) in STRATEGIES.items() if launch_of(name) == key]
    compiled = [run for run in runs if compiles(run.settings)]
    eager = [run for run in runs if not compiles(run.settings)]
    if key == "1":
        references = {reference_run(case, model_settings(settings)) for case, _, settings in STRATEGIES.values()}
        return compiled + sorted(references, key=lambda r: r.label) + eager, ONE_THREAD
    return compiled + eager, {}


LAUNCHES = sorted({launch_of(name) for name in STRATEGIES} | {"1"})


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    """``launches(key)``: that launch (see runs_of), made once, when first asked for."""
    made: dict[str, Launch] = {}

    def get(key: str) -> Launch:
        if key not in made:
            runs, env = runs_of(key)
            made[key] = launch(tmp_path_factory.mktemp(f"torch-{key}"), runs, LAUNCH_COMMON, env=env)
        return made[key]

    return get


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategy_matches_one_process(strategy, launches):
    case, _, settings = STRATEGIES[strategy]
    got = launches(launch_of(strategy)).trajectory(strategy)
    want = launches("1").trajectory(reference_run(case, model_settings(settings)).label)
    assert len(got) == len(want) == 4
    assert_trajectories_match(got, want, f"torch {strategy}")
    assert got[0][0] != got[-1][0]  # the optimizer moved the weights: later steps compare trained models


def test_tensor_parallel_ranks_share_their_tokens(launches):
    """Two TP ranks train one replica on one batch: the batch's tokens count once, not twice (the figures
    the orchestrator computes from both ranks' records of tensor_parallel_gqa_rotary: llama_tiny, micro
    batch 8, tensor parallel 2)."""
    metrics = launches("2").metrics("tensor_parallel_gqa_rotary")
    assert metrics.tokens_per_step == 8 * 128  # micro batch x sequence of the one replica
    assert metrics.tokens_per_s_per_device == pytest.approx(metrics.tokens_per_s_total / 2)


@pytest.mark.parametrize("key", LAUNCHES)
def test_each_launch_kept_its_temporary_files_in_the_run_folder(launches, key):
    """The launcher and the compiler wrote nothing to the TMPDIR they were started with: the plan's TMPDIR
    and compiler cache are inside the run folder (and the compiler did use its cache there)."""
    done = launches(key)
    assert list(done.system_tmp.iterdir()) == []
    if any(compiles(run.settings) for run in runs_of(key)[0]):
        assert "compile" in done.finished, done.errors
        assert any((done.run_dir / "cache" / "torchinductor").iterdir())


def test_fsdp_beside_tensor_parallel_times_both_with_their_own_groups(launches):
    """Four ranks, FSDP2 over data parallel's 2 beside TP2 (gpt2_tiny, stage3): every rank issues the same
    collectives in the same order, so the default group's barrier before each never deadlocks; each delay
    lands in communication. (TP2's exact growth by the delay is tests/test_breakdown_tp.py's: four ranks on a
    loaded machine make the collectives' own time too noisy to bound it within 20 %.)"""
    done = launches("4")
    records = [r for rank in done.ranks("fsdp_stage3_x_tensor_parallel") for r in rank.breakdowns]
    n_layer = done.plans["fsdp_stage3_x_tensor_parallel"].workload.model.n_layer
    first = records[0]
    assert len(records) == 4 and first.steps == 3
    assert first.not_measured is None and first.group_size == 2
    assert all(r.collective_ops == first.collective_ops and r.group_sizes == first.group_sizes for r in records)
    ops = Counter(first.collective_ops)  # TP2's: 2 forward + q, k, v, fc backward a block
    assert ops["allreduce"] == 6 * n_layer and ops["allgather"] and ops["reducescatter"]
    delay = len(first.collective_ops) * FSDP_DELAY_MS / 1000
    for r in records:  # every delay sleeps inside communication
        assert delay <= min(r.communication_s) < 2 * delay, r.communication_s

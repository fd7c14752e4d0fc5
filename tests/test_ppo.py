"""Task ppo (RLHF): the phases' FLOPs against torch's count, learning on a fixed reward, LoRA training only
adapters, ppo_tiny on one process and under DDP and ZeRO-2 on real torchrun ranks, the reference table's OOM
cell, and every ppo_* case planned. The one-process run is the sweep's point that fits beside the one out of
memory (ppo_runs: a launch fewer than a run of its own)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.results.report.task_figures import figures_view, round_dir_figures
from training.contract import flops
from training.harness import Ranks
from training.contract.spec import ModelSpec, PPOSpec, TrainSpec
from training.torch.ppo_experience import action_values
from training.torch.ppo_generate import generate
from training.torch.ppo_loop import PPOWorker
from training.torch.ppo_models import action_log_probs, build_roles

from .goldens import Golden, run_golden
from .runner import copy_tree, expect_shared_machine, run_cli

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(n_layer=2, n_head=4, d_model=64, vocab_size=256, seq_len=64)
PPO = dict(experience_batch_size=4, num_episodes=2, max_timesteps=1, update_timesteps=1, max_epochs=1,
           prompt_length=12, generation_length=6)


# One OpenMP thread, as torchrun gives each rank of a launch of several: beside the other lanes, two threads
# spinning at every barrier cost ~3x the CPU (tests/test_loss_runs.py measured it). For this module's processes
# (ONE_THREAD: the 1x1 runs, whose torchrun would start two) and its in-process tests (`one_thread`).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _count(fn) -> int:
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("critic", [{}, {"critic_n_layer": 1, "critic_d_model": 32, "critic_n_head": 2}])
def test_each_phase_counts_what_flop_counter_counts(critic):
    actor_spec, ppo, train = ModelSpec(**TINY), PPOSpec(**PPO, **critic), TrainSpec(micro_batch_size=2, steps=2,
                                                                                     warmup_steps=1)
    critic_spec = ppo.critic_model(actor_spec)
    roles = build_roles(actor_spec, critic_spec, train, torch.device("cpu"))
    phase = flops.ppo_phase_flops(actor_spec, critic_spec, ppo.prompt_length, ppo.generation_length, train)
    b, g = 3, ppo.generation_length
    prompts = torch.randint(0, actor_spec.vocab_size, (b, ppo.prompt_length))
    gen = torch.Generator().manual_seed(0)
    sequences = generate(roles.actor, prompts, g, 1.0, 50, gen)
    assert _count(lambda: generate(roles.actor, prompts, g, 1.0, 50, gen)) == b * phase["generation"].total

    def forwards():
        with torch.no_grad():
            action_log_probs(roles.actor, sequences, g), action_log_probs(roles.initial, sequences, g)
            action_values(roles.critic, sequences, g), roles.reward(sequences)[:, -1]
    assert _count(forwards) == b * phase["forwards"].total

    def learning():
        action_log_probs(roles.actor, sequences, g).sum().backward()
        action_values(roles.critic, sequences, g).sum().backward()
    assert _count(learning) == b * phase["learning"].total
    # The attention part is its own term: the reference's count (all parameters, no attention) differs.
    assert phase["learning"].attention > 0 and phase["learning"].reference != phase["learning"].total


def test_lora_phases_count_what_flop_counter_counts():
    """With LoRA every phase counts the adapters too: their forwards in generation and in the actor's and
    critic's scoring passes (the frozen initial and reward copies have none), and the LoRA training count."""
    actor_spec, ppo = ModelSpec(**TINY), PPOSpec(**PPO)
    train = TrainSpec(micro_batch_size=2, steps=2, warmup_steps=1, lora_rank=4, lora_targets=("q", "v", "fc"))
    roles = build_roles(actor_spec, actor_spec, train, torch.device("cpu"))
    phase = flops.ppo_phase_flops(actor_spec, actor_spec, ppo.prompt_length, ppo.generation_length, train)
    b, g = 3, ppo.generation_length
    prompts = torch.randint(0, actor_spec.vocab_size, (b, ppo.prompt_length))
    gen = torch.Generator().manual_seed(0)
    assert _count(lambda: generate(roles.actor, prompts, g, 1.0, 50, gen)) == b * phase["generation"].total
    sequences = torch.randint(0, actor_spec.vocab_size, (b, ppo.total_length))

    def forwards():
        with torch.no_grad():
            action_log_probs(roles.actor, sequences, g), action_log_probs(roles.initial, sequences, g)
            action_values(roles.critic, sequences, g), roles.reward(sequences)[:, -1]
    assert _count(forwards) == b * phase["forwards"].total

    def learning():
        action_log_probs(roles.actor, sequences, g).sum().backward()
        action_values(roles.critic, sequences, g).sum().backward()
    assert _count(learning) == b * phase["learning"].total
    assert flops.lora_adapter_forward_per_token(actor_spec, train) == 2 * 2 * 4 * ((64 + 64) * 2 + 64 + 256)


def _worker(train: dict, ppo: dict) -> PPOWorker:
    from training.contract.spec import WorkerConfig

    workload = {"task": "ppo", "model": TINY, "train": train, "ppo": ppo}
    cfg = WorkerConfig.model_validate({"workload": workload, "runtime": {
        "case_name": "test", "run_id": "test", "round": 1, "framework": "torch", "device": {"kind": "cpu"}}})
    return PPOWorker(cfg, Ranks(rank=0, world_size=1, local_rank=0, node_rank=0))


class ConstantReward(torch.nn.Module):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.ones(idx.shape, dtype=torch.float32)


def test_the_critic_learns_a_fixed_reward():
    worker = _worker(dict(micro_batch_size=4, steps=16, warmup_steps=1, lr=3e-3),
                     {**PPO, "num_episodes": 16})
    worker.roles.reward = ConstantReward()  # every sequence scores 1: the value loss can only fall
    losses = [float(worker.learn(worker.experience())[1]) for _ in range(16)]
    assert sum(losses[-4:]) < 0.25 * sum(losses[:4]), losses


def test_lora_trains_only_the_adapters_and_the_value_head():
    worker = _worker(dict(micro_batch_size=4, steps=2, warmup_steps=1, lora_rank=4), PPO)
    models = {"actor": worker.actor.plain, "critic": worker.critic.plain, "initial": worker.roles.initial,
              "reward": worker.roles.reward}
    before = {(m, n): p.detach().clone() for m, model in models.items() for n, p in model.named_parameters()}
    trainable = {(m, n) for m, model in models.items() for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("value_head") for _, n in trainable)
    worker.learn(worker.experience())
    worker.learn(worker.experience())  # the second step: lora_a gets a gradient once lora_b is non-zero
    changed = {key for key, p in before.items()
               if not torch.equal(p, dict(models[key[0]].named_parameters())[key[1]])}
    assert changed == trainable  # every adapter moved, nothing else did (frozen base, initial, reward)


def _figures(round_dir: Path) -> dict:
    return {f.key: f for f in round_dir_figures(round_dir)}


PEAK_FP32 = 0.5  # TFLOP/s: the cpu vendor's fp32 datasheet peak in the module's copy of the checkout
LAYOUTS = [(1, "none"), (2, "none"), (2, "stage2")]
FITS_MIB = 1000000  # the sweep's debug.memory_limit_mib that no run reaches: its point is the 1x1 layout's run


@dataclass(frozen=True)
class LayoutRun:
    """Where one layout's round is: its invocation, `show last` of it, the round's place in its store (oldest
    first) and the workload keys that pick it."""

    golden: Golden
    show: str
    index: int
    workload: dict


@pytest.fixture(scope="module")
def ppo_runs(tmp_path_factory) -> tuple[dict, Golden]:
    """ppo_tiny on real torchrun ranks in every layout of LAYOUTS, on a copy of the checkout whose cpu vendor names
    an fp32 peak (the MFU test reads the 1x1 case), in two invocations (tests/goldens.py's style): the reference
    table's sweep of the 1x1 layout over debug.memory_limit_mib (64: out of memory after its first step; FITS_MIB,
    never reached: the 1x1 layout's run, its point a round like any other), then both 1x2 layouts in one `run`
    (one orchestrator and store). ({(processes, sharding): LayoutRun}, the sweep)."""
    from .goldens import test_conf  # here, not at the top: pytest would collect it as a test
    workdir = tmp_path_factory.mktemp("ppo-runs")
    root = workdir / "root"
    for folder in ("cases", "vendors", "configs"):
        copy_tree(ROOT / folder, root / folder)
    expect_shared_machine(root / "configs" / "test_conf.yaml")
    (root / "training").symlink_to(ROOT / "training")
    vendor = root / "vendors" / "cpu" / "vendor.yaml"
    vendor.write_text(vendor.read_text().replace("peak_tflops: {}", f"peak_tflops: {{fp32: {PEAK_FP32}}}"))
    sweep = run_golden(workdir / "sweep", "sweep", "ppo_tiny:torch:cpu:1:1", "--grid",
                       f"debug.memory_limit_mib=64,{FITS_MIB}", "--grid", "layout=1x1", "--format", "markdown",
                       "--root", str(root), "--log-root", str(workdir / "sweep" / "logs"), expect=None,
                       extra_env=ONE_THREAD)
    two = [layout for layout in LAYOUTS if layout[0] == 2]
    conf = test_conf(workdir / "ppo_conf.yaml", [{"case": f"ppo_tiny:torch:cpu:1:{n}", "set": {
        "parallel.sharding": sharding}} for n, sharding in two])
    runs = run_golden(workdir / "runs", "run", "--test-conf", str(conf), "--root", str(root), extra_env=ONE_THREAD)
    layouts = {(1, "none"): LayoutRun(sweep, _show_last(sweep), 1, {"debug.memory_limit_mib": FITS_MIB})}
    shown = _show_last(runs)
    layouts.update({layout: LayoutRun(runs, shown, two.index(layout), {"parallel.sharding": layout[1]})
                    for layout in two})
    return layouts, sweep


def _show_last(golden: Golden) -> str:
    show = run_cli(golden.workdir, "show", "last", "--db", str(golden.db))
    assert show.returncode == 0, show.stderr
    return show.stdout


def _show_block(show: str, index: int) -> str:
    """The ``index``-th round's block of ``accelbench show`` (attempts oldest first: test_conf's order)."""
    starts = [m.start() for m in re.finditer(r"^\S.* round \d+ attempt \d+: ", show, flags=re.M)]
    return show[starts[index]:(starts + [len(show)])[index + 1]]


@pytest.mark.e2e
@pytest.mark.parametrize("processes, sharding", LAYOUTS)
def test_ppo_tiny_runs_on_real_torchrun_ranks(ppo_runs, processes, sharding):
    run = ppo_runs[0][(processes, sharding)]
    golden = run.golden
    case_name = f"ppo_tiny:torch:cpu:1:{processes}"
    round_result = golden.doc(case_name, **run.workload)
    assert round_result["status"] == "ok" and round_result["steps_completed"] == 6
    assert round_result["workload"]["parallel"]["sharding"] == sharding
    figures = _figures(golden.round_dir(round_result))
    for phase, unit in (("experience.samples_per_s", "samples/s"), ("learning.tflops", "TFLOP/s"),
                        ("iteration.samples_per_s", "samples/s")):
        assert figures[phase].unit == unit and figures[phase].value > 0 and figures[phase].ranks == processes
        per_device = figures[phase + "_per_device"].value
        assert figures[phase].value == pytest.approx(per_device * processes)  # sum over ranks, mean per device
    assert figures["experience.tflops"].formula == flops.PPO_FORMULA
    # The headline samples/s counts what a PPO step processes (the sequences made and learned from, as the
    # workers report), so on one process it is the iteration's rate; on two, its slowest-rank reading.
    ppo, metrics = round_result["workload"]["ppo"], round_result["metrics"]
    assert metrics["samples_per_step"] == processes * ppo["update_timesteps"] * ppo["experience_batch_size"]
    iteration = figures["iteration.samples_per_s"].value
    assert metrics["samples_per_s"] == (pytest.approx(iteration, rel=1e-6) if processes == 1
                                        else pytest.approx(iteration, rel=0.25))
    view = figures_view("t", list(figures.values()))
    assert any(row[0] == "learning.samples_per_s" for row in view.rows) and view.notes
    # The same figures are in results.json, in the store, and in `accelbench show`.
    stored = {f["name"]: f["value"] for f in round_result["figures"]}
    mfu = {name for name in stored if name.endswith(".mfu")}  # the orchestrator's, against the module's peak
    assert mfu == {"experience.mfu", "learning.mfu"}
    assert {name: value for name, value in stored.items() if name not in mfu} == {f.name: f.value for f in
                                                                                 figures.values()}
    row = golden.attempts()[run.index]  # the store's rows, oldest first: test_conf's (the sweep's points') order
    assert (row["case_name"], row["results_path"]) == (case_name, round_result["results_path"])
    assert row["figures"] == round_result["figures"]
    show = _show_block(run.show, run.index)
    assert show.startswith(f"{case_name} round 1 attempt 1: ok"), show
    value = figures["iteration.samples_per_s"].value
    assert f"iteration.samples_per_s: {value:,.4g} samples/s" in show, show
    # the time breakdown per phase of the update (training/torch/ppo_breakdown.py), in results.json and in show
    tb = metrics["time_breakdown"]
    assert tb["unit"] == "update" and tb["measured"]["breakdown_steps"] == 3, tb["measured"]
    learning = tb["phases"]["learning"]["measured"]
    assert set(learning["collective_ops"]) == (set() if processes == 1 else {"allreduce"} if sharding == "none"
                                               else {"allgather", "reducescatter"})
    assert set(learning["compute_parts"]) == {"actor", "critic"}
    assert "time breakdown per update, measured on 3 serialised updates after the measured ones" in show
    assert "\n    experience making: " in show and "(generation " in show
    assert "\n    learning: " in show and "biggest lever: " in show


@pytest.mark.e2e
def test_each_phase_gets_an_mfu_against_the_named_peak(ppo_runs):
    run = ppo_runs[0][(1, "none")]  # the module's 1x1 run, with the vendor's fp32 peak of PEAK_FP32
    doc = run.golden.doc("ppo_tiny:torch:cpu:1:1", **run.workload)
    figures = {f["name"]: f for f in doc["figures"]}
    for phase in ("experience", "learning"):
        mfu = figures[f"{phase}.mfu"]
        assert mfu["value"] == pytest.approx(figures[f"{phase}.tflops_per_device"]["value"] / PEAK_FP32, rel=1e-12)
        assert mfu["formula"].startswith(f"{phase}.tflops_per_device / {PEAK_FP32:g} TFLOP/s (cpu fp32 datasheet peak")
    assert "iteration.mfu" not in figures  # a whole iteration has no TFLOP/s of its own


PPO_CASES = sorted(p.name for p in (ROOT / "cases").iterdir() if p.name.startswith("ppo_"))
NEW_PRETRAIN = ["gpt2_2b", "opt_700m", "opt_3.5b", "opt_5.5b", "opt_10b"]


def test_the_reference_sizes_exist_as_cases():
    gpt = "s m l xl 2b 4b 6b 8b 10b 12b 15b 18b 20b 24b 28b 32b 36b 40b 175b".split()
    opt = "125m 350m 700m 1.3b 2.7b 3.5b 5.5b 6.7b 10b 13b".split()
    assert set(PPO_CASES) == {f"ppo_gpt2_{s}" for s in gpt} | {f"ppo_opt_{s}" for s in opt} | {"ppo_tiny"}


@pytest.mark.parametrize("case", PPO_CASES + NEW_PRETRAIN)
def test_every_ppo_and_new_pretraining_case_plans(case, tmp_path):
    plan = build_run_plan(load_inputs(ROOT), [f"{case}:torch:cpu:1:2"], "run-1", tmp_path / "logs")
    (planned,) = plan.cases
    workload = planned.workload
    assert workload.task == ("ppo" if case.startswith("ppo_") else "pretrain")
    if workload.ppo is not None:  # a step is one learning update; the first episode is the warm-up
        assert workload.train.steps == workload.ppo.num_episodes * workload.ppo.updates_per_episode
        assert workload.ppo.total_length <= workload.model.seq_len


@pytest.mark.e2e
def test_the_reference_table_shows_oom_as_oom(ppo_runs):
    """The sweep's pivot (run_benchmarks/sweep/views.py) is the reference's table for ppo cases too: a
    point that ran out of memory (a smaller device: debug.memory_limit_mib) reads OOM beside one that fit
    (ppo_runs' sweep, whose fitting point is the 1x1 layout's run)."""
    result = ppo_runs[1].result
    assert "memory_limit_mib by layout" in result.stdout, result.stdout + result.stderr
    pivot = result.stdout[result.stdout.index("memory_limit_mib by layout"):]
    assert "| 64 | OOM |" in pivot and re.search(r"\| 1000000 \| [\d,.]+ tok/s", pivot), pivot


@pytest.mark.parametrize("setting, fragment", [
    ("train.steps=5", "set train.steps to 3"),
    ("ppo.generation_length=2000", "longer than model.seq_len"),
    ("parallel.tensor_parallel_degree=2", "task ppo runs data parallel"),
    ("ppo.update_timesteps=3", "multiple of update_timesteps"),
])
def test_bad_ppo_settings_are_refused_with_the_fix(accelbench, setting, fragment):
    result = accelbench("run", "ppo_gpt2_s:torch:cpu:1:2", "--dry-run", "--set", setting)
    assert result.returncode != 0 and fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr

"""Paddle workloads: the same model as PyTorch, trained by fleet, loss for loss.

Both frameworks start from one weights file (``train.init_weights``, written by
the torch model with the case's seed) and read one token file in the
Megatron/PaddleNLP format, so their losses and gradient norms over the first
steps must agree, within test_parity's tolerances (5e-6 absolute on losses
near ln(vocab) = 6.93, 1e-5 relative on gradient norms; measured here: at
most 9.5e-7 and 1.9e-6, the order of fp32 reductions).

Every layout that runs on a CPU is run with 2 ranks (fleet with 4 gloo ranks
is unreliable on this machine; see issue 5): data parallel, sharding stage1,
tensor parallel (fleet's mp layers, through ``training/paddle/cpu_compat.py``),
sequence parallel (fleet's sequence_parallel_utils over tensor parallel 2;
measured: 5e-7 from one torch process, and 4e-4 when the norms' gradients are
not all-reduced, so 5e-6 tells the two apart with room to spare) and pipeline parallel
(PipelineLayer with tied embeddings), also with recompute (fleet's
``recompute_ctx``: the model-parallel group).

Runs are launched together, as in tests/test_parity.py (tests/parity_launch.py): one Paddle launch of one
process, and the 2-rank layouts in one launch per fleet layout, since ``fleet.init`` sets up one hybrid
topology per process (a second call keeps the first's groups): data parallel; sharding stage1; tensor
parallel 2 (tensor and both sequence-parallel runs); pipeline 2 (with and without recompute). Those four
launches are shared with the Paddle breakdown tests and the finetune layouts (tests/paddle_pairs.py). Both
torch references (the shared model and the llama-like one) train in this process with one OpenMP thread
(tests/loss_runs.py: the plan, worker entry and perf records of a 1x1 launch, without torchrun's start, which
was ~7 s of CPU; torchrun's TMPDIR check is tests/test_parity.py's). The two-node run stays one whole
``accelbench run``: its point is two launchers meeting through the master.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from run_benchmarks.errors import UserError

from .conftest import ROOT
from .runner import ends_with_the_test
from .loss_runs import in_process, one_thread
from .paddle_pairs import CASE, ParityInputs
from .parity_launch import Launch, Run, launch
from .test_parity import COMMON, LAUNCH_COMMON, ONE_THREAD, assert_trajectories_match, trajectory
from .test_plan import build


@dataclass(frozen=True)
class SharedStart:
    settings: tuple[str, ...]  # the shared weights and token file (tests/paddle_pairs.py)
    llama_settings: tuple[str, ...]  # the same for the llama-like model (LLAMA_LIKE)
    torch: Launch  # one torch process with the whole batch of 8, for each: "reference", "reference-llama_like"

    @property
    def reference(self) -> list[tuple[float, float]]:
        return self.torch.trajectory("reference")


@pytest.fixture(scope="module")
def shared_start(paddle_inputs, tmp_path_factory) -> SharedStart:
    """Torch's references, trained in this process with one OpenMP thread (tests/loss_runs.py), from the weights
    and token file every Paddle run starts from."""
    settings, llama_settings = paddle_inputs.settings, paddle_inputs.llama_settings
    with one_thread():
        torch = in_process(tmp_path_factory.mktemp("paddle_parity"), [
            Run("reference", f"{CASE}:torch:cpu:1:1", ("train.micro_batch_size=8", *settings)),
            Run("reference-llama_like", f"{CASE}:torch:cpu:1:1", ("train.micro_batch_size=8", *llama_settings))],
            LAUNCH_COMMON)
    return SharedStart(settings, llama_settings, torch)


PADDLE_LAYOUTS = {
    "data_parallel": ("train.micro_batch_size=4",),
    "sharding_stage1": ("train.micro_batch_size=4", "parallel.sharding=stage1"),
    "tensor_parallel": ("train.micro_batch_size=8", "parallel.tensor_parallel_degree=2"),
    # Fleet's sequence_parallel_utils (gloo's reduce-scatter through cpu_compat); two micro-batches, so the
    # hooks that all-reduce the norms' gradients fire once per step, on the accumulated gradient.
    "sequence_parallel": ("train.micro_batch_size=4", "train.gradient_accumulation_steps=2",
                          "parallel.tensor_parallel_degree=2", "parallel.sequence_parallel=true"),
    "pipeline_parallel": ("train.micro_batch_size=4", "train.gradient_accumulation_steps=2",
                          "parallel.pipeline_parallel_degree=2"),
    "pipeline_parallel_recompute": ("train.micro_batch_size=4", "train.gradient_accumulation_steps=2",
                                    "parallel.pipeline_parallel_degree=2", "train.recompute=full"),
}
LLAMA_LIKE_SP = "sequence_parallel_llama_like_recompute"  # on the llama-like model: see its test


def fleet_layout(case) -> tuple:
    """What fleet.init is given for a planned run (training/paddle/train.py's Layout and hybrid.strategy read
    no more than this): runs that differ here cannot share a process."""
    spec, world = case.workload, case.name.world_size
    par = spec.parallel
    pipeline = (spec.train.gradient_accumulation_steps, spec.train.micro_batch_size) \
        if par.pipeline_parallel_degree > 1 else None
    return (world, par.tensor_parallel_degree, par.pipeline_parallel_degree, par.sharding != "none",
            par.sharding_parallel_degree, par.data_degree(world), pipeline)


def two_rank_runs(inputs: ParityInputs) -> list[Run]:
    """Every layout at 2 ranks, for tests/paddle_pairs.py's shared launches (one per fleet layout). The layouts
    run no time-breakdown steps (LAUNCH_COMMON; they would follow the 4 steps compared): data parallel, sharding
    stage1, tensor and sequence parallel have theirs run and tested in the same launches by the breakdown
    modules, a pipeline has none measured. The llama-like run keeps them: the only real run of Paddle's
    breakdown under recompute and an untied head."""
    runs = [Run(layout, f"{CASE}:paddle:cpu:1:2", (*LAUNCH_COMMON, *PADDLE_LAYOUTS[layout], *inputs.settings))
            for layout in sorted(PADDLE_LAYOUTS)]
    return runs + [Run(LLAMA_LIKE_SP, f"{CASE}:paddle:cpu:1:2", (
        *COMMON, "train.micro_batch_size=8", "train.recompute=full", "parallel.tensor_parallel_degree=2",
        "parallel.sequence_parallel=true", *inputs.llama_settings))]


@pytest.fixture(scope="module")
def paddle_launches(shared_start, paddle_pairs, tmp_path_factory):
    """``paddle_launches(world)``: world 1, the one process (made once, when first asked for); world 2, every
    layout (tests/paddle_pairs.py: one launch per fleet layout, shared with the breakdown tests)."""
    made: dict[int, Launch] = {2: paddle_pairs.launch}

    def get(world: int) -> Launch:
        if world not in made:
            made[world] = launch(tmp_path_factory.mktemp(f"paddle-{world}"), [Run(
                "one_process", f"{CASE}:paddle:cpu:1:1", ("train.micro_batch_size=8", *shared_start.settings))],
                COMMON, env=ONE_THREAD)
        return made[world]

    return get


def test_paddle_trains_the_torch_model_loss_for_loss(shared_start, paddle_launches):
    paddle_steps = paddle_launches(1).trajectory("one_process")
    assert_trajectories_match(paddle_steps, shared_start.reference, "paddle 1 process")
    assert paddle_steps[0][0] != paddle_steps[-1][0]  # trained: later steps compare updated weights


@pytest.mark.parametrize("layout", sorted(PADDLE_LAYOUTS))
def test_every_cpu_layout_matches_one_process(shared_start, paddle_launches, layout):
    got = paddle_launches(2).trajectory(layout)
    # The Paddle worker reports no gradient norm under pipeline parallelism and sharding (training/paddle/train.py).
    assert_trajectories_match(got, shared_start.reference, f"paddle {layout}",
                              norms="pipeline" not in layout and "sharding" not in layout)


def test_sequence_parallel_with_an_untied_head_rmsnorm_swiglu_rotary_and_recompute(shared_start, paddle_launches):
    """The other half of the model's sequence-parallel paths: gate/fc gathered once, the untied (column-split)
    LM head after the gather, RMSNorm on slices, GQA with rotary, recompute re-running the collectives.
    Measured: 1e-6 from one torch process (without the norm-gradient hooks: 4e-4)."""
    got = paddle_launches(2).trajectory(LLAMA_LIKE_SP)
    assert_trajectories_match(got, shared_start.torch.trajectory("reference-llama_like"),
                              "paddle sequence parallel, llama-like, recompute")


def test_the_layouts_took_one_launch_per_fleet_layout(paddle_launches):
    """dp, sharding, tensor parallel (3 runs), pipeline (2 runs): fleet.init once per process."""
    assert paddle_launches(2).launches == 4


@pytest.mark.parametrize("world", [1, 2])
def test_each_launch_kept_its_temporary_files_in_the_run_folder(paddle_launches, world):
    """Paddle's launcher and ranks; torch's references train in this process (torchrun's launches: the same
    test in tests/test_parity.py)."""
    assert list(paddle_launches(world).system_tmp.iterdir()) == []


def test_sequence_parallel_plans_for_paddle_but_not_inside_a_pipeline(root, tmp_path):
    sp = ("parallel.tensor_parallel_degree=2", "parallel.sequence_parallel=true")
    (case,) = build(root, tmp_path, f"{CASE}:paddle_3.3:cpu:1:2", assignments=sp).cases
    assert case.workload.parallel.sequence_parallel
    with pytest.raises(UserError) as info:
        build(root, tmp_path, f"{CASE}:paddle_3.3:cpu:1:4", assignments=(
            *sp, "parallel.pipeline_parallel_degree=2", "train.gradient_accumulation_steps=2"))
    assert "sequence_parallel with pipeline parallelism is not implemented in training/paddle" in str(info.value)


def test_a_layout_paddle_cannot_run_on_cpu_is_unsupported_not_failed(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "start_task.py", "--case_name", f"{CASE}:paddle:cpu:1:2",
                           "--log-root", str(tmp_path), "--set", "parallel.sharding=stage2",
                           "--set", "train.steps=2", "--set", "train.warmup_steps=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=ends_with_the_test())
    results = [json.loads(p.read_text()) for p in tmp_path.glob("*/*/round1/results.json")]
    assert [r["status"] for r in results] == ["unsupported"], done.stdout + done.stderr
    assert done.returncode == 1, "README: exit 1 when a round is not ok (unsupported included)"
    assert "group_sharded_parallel" in results[0]["reason"] + " ".join(results[0]["error_lines"])


PUBLISHED = ["config_TP1PP1SH2SP8A10080Gx1x8", "config_TP2PP1SH1SP4A10080Gx1x8", "config_TP2PP1SH2SP4A10080Gx1x8",
             "config_TP2PP4SH1SP1A10080Gx1x8"]


@pytest.mark.parametrize("extern", PUBLISHED + [name.replace("80G", "40G") for name in PUBLISHED])
def test_published_gpt3_configs_plan_for_eight_a100(root, tmp_path, extern):
    plan = build(root, tmp_path, "gpt3_6.7B:paddle_2.5.1:A100:1:8", extern_config=extern)
    case = plan.cases[0]
    par, train = case.workload.parallel, case.workload.train
    tp, pp, sharding_stage, shard_degree = (int(x) for x in
                                            extern.removeprefix("config_TP").split("A100")[0]
                                            .replace("PP", " ").replace("SH", " ").replace("SP", " ").split())
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree, par.sharding, par.sharding_parallel_degree) \
        == (tp, pp, f"stage{sharding_stage}", shard_degree)
    data = 8 // (tp * pp)
    global_sequences = train.micro_batch_size * data * train.gradient_accumulation_steps
    assert global_sequences * case.workload.model.seq_len == 1024 * 2048  # 2M tokens per step
    assert (train.precision, train.amp_level) == ("fp16", "O2")
    assert train.recompute == ("none" if "80G" in extern else "full")
    argv = case.rounds[0].nodes[0].argv
    assert argv[1:3] == ["-m", "paddle.distributed.launch"] and "--nproc_per_node=8" in argv


def test_a_config_that_does_not_fit_the_world_size_is_refused(root, tmp_path):
    with pytest.raises(UserError) as info:
        build(root, tmp_path, "gpt3_6.7B:paddle_2.5.1:A100:1:4", extern_config="config_TP2PP1SH2SP4A10080Gx1x8")
    assert "tensor 2 x pipeline 1 x sharding 4 = 8 does not divide the 4 ranks" in str(info.value)
    assert "config_TP2PP1SH2SP4A10080Gx1x8.yaml" in str(info.value)


def test_multi_node_paddle_launch_names_master_rank_and_address(root, tmp_path):
    from run_benchmarks.backends.launchers import NodeLaunch, get

    argv = get("paddle.distributed.launch").argv(NodeLaunch(
        python="python", nnodes=2, nprocs_per_node=8, node_rank=1, master_addr="10.0.0.1", master_port=29500,
        local_addr="10.0.0.2", log_dir=tmp_path, worker_config=tmp_path / "c.json", code_root=tmp_path))
    assert {"--nnodes=2", "--master=10.0.0.1:29500", "--rank=1", "--host=10.0.0.2"} <= set(argv)
    assert argv[-3:] == [str(tmp_path / "training/run_pretraining.py"), "--config", str(tmp_path / "c.json")]


@pytest.mark.parametrize("line, start_error", [
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
     "port: 29977, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", True),
    ("RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:144] connect [127.0.0.1]:6170: "
     "Connection refused", True),
    ("[enforce fail at ../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 150000ms "
     "for recv operation to complete", True),
    ("RuntimeError: Gloo connectFullMesh failed with ...", True),
    ("training.faults.InjectedFailure: injected failure on rank 0 at step 3", False),
    ("ConnectionRefusedError: [Errno 111] Connection refused (a dataset server)", False),
])
def test_a_gloo_connect_failure_is_a_start_error_not_a_result(line, start_error):
    from run_benchmarks.backends import launchers
    from run_benchmarks.catalog.frameworks import get

    for framework in ("paddle", "torch"):  # each framework's launcher (backends/launchers/) knows the errors
        assert (launchers.get(get(framework).launcher).start_error_in(["Traceback (most recent call last):", line])
                is not None) == start_error


@pytest.mark.parametrize("name, extern, layout", [
    ("gpt3_tiny:paddle_3.3:cpu:1:2", "config_TP2PP1SH1SP1cpux1x2", (2, "none", 1)),
    ("gpt3_tiny:paddle_3.3:cpu:1:2", "config_TP1PP1SH1SP2cpux1x2", (1, "stage1", 2)),
    ("gpt3_tiny:torch:cpu:1:2", "config_TP1PP1SH1SP2cpux1x2", (1, "stage1", 2)),  # one vocabulary, both frameworks
])
def test_cpu_vendor_configs_drive_the_tiny_case(root, tmp_path, name, extern, layout):
    par = build(root, tmp_path, name, extern_config=extern).cases[0].workload.parallel
    assert (par.tensor_parallel_degree, par.sharding, par.data_degree(2)) == layout


def test_two_paddle_nodes_meet_through_the_master_and_match_one_process(shared_start, tmp_path):
    """Two launchers (two local hosts), each told --master, --rank and --host, as on two machines."""
    settings, torch_steps = shared_start.settings, shared_start.reference
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("hosts:\n  - {name: n0, address: 127.0.0.1}\n  - {name: n1, address: 127.0.0.1}\n")
    got = trajectory(tmp_path, f"{CASE}:paddle:cpu:2:1", "train.micro_batch_size=4", *settings,
                     cli_args=("--cluster", str(cluster)))
    assert_trajectories_match(got, torch_steps, "paddle 2 nodes")

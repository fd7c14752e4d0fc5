"""The plan: what would run where, decided before anything runs."""
import pytest

from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.errors import UserError
from run_benchmarks.planner.build import build_run_plan

from .conftest import write


def build(root, tmp_path, *names, **kwargs):
    return build_run_plan(load_inputs(root), list(names), "run-1", tmp_path / "logs", **kwargs)


def test_single_node_plan_has_launcher_env_and_log_paths(root, tmp_path):
    plan = build(root, tmp_path, "gpt2_tiny:torch_2.13:cpu:1:2")
    (case,) = plan.cases
    (rnd,) = case.rounds
    (node,) = rnd.nodes
    assert rnd.dir == tmp_path / "logs/run-1/gpt2_tiny-torch_2.13-cpu-1x2/round1"
    assert node.log_dir == rnd.dir / "localhost_noderank0"
    argv = node.argv
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    for flag in ("--nnodes=1", "--nproc-per-node=2", "--node-rank=0", "--master-addr=127.0.0.1",
                 "--master-port=@ACCELBENCH_MASTER_PORT@", "--local-addr=127.0.0.1", "--redirects=3"):
        assert flag in argv
    assert argv[-4:] == ["-m", "training.run_pretraining", "--config", str(rnd.config_path)]
    assert node.env["TMPDIR"] == str(node.log_dir / "tmp")
    assert node.env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(plan.dir))
    runtime = rnd.worker_config.runtime
    assert (runtime.device.kind, runtime.device.torch_device, runtime.device.backend, runtime.round) == (
        "cpu", "cpu", "gloo", 1)


def test_repeat_makes_rounds_with_their_own_ports_and_folders(root, tmp_path):
    """Each round's port is its own: chosen on the master host when that round starts (master_port auto), so
    the plan holds the placeholder for each; a chosen port is free and fresh per start (tests/test_ports.py)."""
    plan = build_run_plan(load_inputs(root), ["gpt2_tiny:torch:cpu:1:1:3"], "r", tmp_path)
    rounds = plan.cases[0].rounds
    assert [r.dir.name for r in rounds] == ["round1", "round2", "round3"]
    assert [next(a for a in r.nodes[0].argv if a.startswith("--master-port")) for r in rounds] == [
        "--master-port=@ACCELBENCH_MASTER_PORT@"] * 3
    assert [r.master_port for r in rounds] == [None] * 3


def test_same_case_twice_gets_two_folders(root, tmp_path):
    plan = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:1", "gpt2_tiny:torch:cpu:1:1")
    assert [c.dir.name for c in plan.cases] == ["gpt2_tiny-torch-cpu-1x1", "gpt2_tiny-torch-cpu-1x1-2"]


def test_multi_node_plan_places_nodes_on_hosts_in_order(root, tmp_path):
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: n0, address: 127.0.0.1}\n"
                                         "  - {name: n1, address: 127.0.0.2}\nmaster_port: 29600\n")
    plan = build_run_plan(load_inputs(root), ["gpt2_tiny:torch:cpu:2:1"], "r", tmp_path)
    nodes = plan.cases[0].rounds[0].nodes
    assert [(n.node_rank, n.host.name) for n in nodes] == [(0, "n0"), (1, "n1")]
    assert "--local-addr=127.0.0.2" in nodes[1].argv and "--master-addr=127.0.0.1" in nodes[1].argv
    assert all("--master-port=29600" in n.argv for n in nodes)


@pytest.mark.parametrize("name, fragments", [
    ("gpt2_huge:torch:cpu:1:1", ["unknown case 'gpt2_huge'", "known cases: allgather, allreduce,", "bloom_7b1"]),
    ("gpt2_tinny:torch:cpu:1:1", ["unknown case 'gpt2_tinny'", "did you mean 'gpt2_tiny'?"]),
    ("gpt2_tiny:torch:tpu:1:1", ["unknown hardware 'tpu'", "known hardware:"]),
    ("gpt2_tiny:torch:CPU:1:1", ["unknown hardware 'CPU'", "did you mean 'cpu'?"]),
    ("gpt2_tiny:jax:cpu:1:1", ["unknown framework 'jax'", "known frameworks: paddle, torch"]),
    ("gpt2_tiny:torch:cpu:2:1", ["asks for 2 nodes but", "cluster.yaml lists 1 host(s)", "lower nnodes"]),
    ("gpt2_tiny:torch:cpu", ["has 3 field(s)"]),
])
def test_bad_case_names_are_refused_with_a_fix(root, tmp_path, name, fragments):
    with pytest.raises(UserError) as info:
        build(root, tmp_path, name)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text
    assert info.value.fix


@pytest.mark.parametrize("name, settings, fragment", [
    ("gpt2_tiny:torch:cpu:1:2", ("parallel.data_parallel_degree=4",),
     "data 4 x tensor 1 x pipeline 1 = 4, but case name 'gpt2_tiny:torch:cpu:1:2' runs 1 node(s) x 2 process(es) = 2"),
    ("gpt2_tiny:torch:cpu:1:6", ("parallel.tensor_parallel_degree=3",), "tensor_parallel_degree 3 must divide the heads"),
    ("llama_tiny:torch:cpu:1:4", ("parallel.tensor_parallel_degree=4",),
     "must divide the heads (n_head 4, key/value heads 2)"),
    ("gpt2_tiny:torch:cpu:1:4", ("parallel.pipeline_parallel_degree=4",), "4 stages is more than the model's 2 layers"),
    ("gpt2_tiny:torch:cpu:1:2", ("parallel.pipeline_parallel_degree=2", "parallel.pipeline_schedule=interleaved"),
     "2 x 2 stage(s) per rank = 4 stages is more than the model's 2 layers"),
    ("gpt2_tiny:torch:cpu:1:2", ("parallel.pipeline_parallel_degree=2",),
     "1f1b needs at least as many micro-batches as stages: train.gradient_accumulation_steps 1 < "),
    ("gpt3_tiny:torch:cpu:1:2", ("parallel.pipeline_parallel_degree=2", "parallel.pipeline_schedule=interleaved",
                                 "train.gradient_accumulation_steps=3"), "3 is not a multiple of 2"),
    ("gpt2_tiny:torch:cpu:1:2", ("parallel.tensor_parallel_degree=2", "parallel.sequence_parallel=true",
                                 "model.seq_len=127"), "seq_len 127 must be a multiple of 2"),
    ("gpt2_tiny:torch:cpu:1:1", ("parallel.sharding=stage2",), "needs more than one data-parallel rank"),
    ("gpt2_tiny:torch:cpu:1:6", ("parallel.sharding=stage1", "parallel.sharding_parallel_degree=4"),
     "tensor 1 x pipeline 1 x sharding 4 = 4 does not divide the 6 ranks"),
])
def test_inconsistent_layouts_are_refused_at_plan_time(root, tmp_path, name, settings, fragment):
    with pytest.raises(UserError) as info:
        build(root, tmp_path, name, assignments=settings)
    text = str(info.value)
    assert "inconsistent parallel layout (set in --set" in text
    assert fragment in text


@pytest.mark.parametrize("settings, fragment", [
    (("parallel.offload=true",), "offload needs sharding stage2 or stage3"),
    (("parallel.sequence_parallel=true",), "it needs tensor_parallel_degree > 1"),
])
def test_strategy_combinations_are_validated(root, tmp_path, settings, fragment):
    with pytest.raises(UserError) as info:
        build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2", assignments=settings)
    assert fragment in str(info.value)


@pytest.mark.parametrize("name, settings, fragment", [
    ("llama_tiny_lora:torch:cpu:1:2", ("parallel.tensor_parallel_degree=2",),
     "LoRA adapters are not split by tensor parallelism"),
    ("llama_tiny:torch:cpu:1:2", ("parallel.tensor_parallel_degree=2", "train.precision=fp16"),
     "use precision bf16 with tensor parallelism"),
    ("gpt2_tiny:torch:cpu:1:4", ("parallel.tensor_parallel_degree=2", "parallel.pipeline_parallel_degree=2",
                                 "train.gradient_accumulation_steps=2"), "pipeline x tensor parallelism (3-D layouts)"),
    ("gpt2_tiny:torch:cpu:1:4", ("parallel.tensor_parallel_degree=2",), "needs sharding stage2 or stage3 (FSDP2 x TP)"),
    ("gpt2_tiny:torch:cpu:1:4", ("parallel.pipeline_parallel_degree=2", "train.gradient_accumulation_steps=2"),
     "data parallelism across pipelines needs sharding stage2 or stage3"),
    ("gpt2_tiny:torch:cpu:1:4", ("parallel.sharding=stage1", "parallel.sharding_parallel_degree=2"),
     "training/torch shards across all 4 data-parallel ranks"),
])
def test_a_consistent_layout_the_workload_lacks_says_so(root, tmp_path, name, settings, fragment):
    with pytest.raises(UserError) as info:
        build(root, tmp_path, name, assignments=settings)
    assert "torch workloads cannot run this layout yet" in str(info.value)
    assert fragment in str(info.value)


def test_tensor_parallel_layouts_plan(root, tmp_path):
    for name, settings in (("llama_tiny:torch:cpu:1:2", ("parallel.tensor_parallel_degree=2",)),
                           ("gpt2_tiny:torch:cpu:1:4", ("parallel.tensor_parallel_degree=2", "parallel.sharding=stage3"))):
        (case,) = build(root, tmp_path, name, assignments=settings).cases
        assert case.workload.parallel.tensor_parallel_degree == 2


def test_extern_config_layout_is_blamed_on_its_file(root, tmp_path):
    extern = write(root / "vendors/cpu/gpt2_tiny/torch/config_DP4.yaml", "parallel:\n  data_parallel_degree: 4\n")
    with pytest.raises(UserError) as info:
        build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2", extern_config="config_DP4")
    assert f"set in {extern}" in str(info.value)


def test_no_case_at_all(root, tmp_path):
    with pytest.raises(UserError) as info:
        build_run_plan(load_inputs(root), [], "r", tmp_path)
    assert "no case to run" in str(info.value)


def test_building_a_plan_writes_nothing(root, tmp_path):
    build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2")
    assert not (tmp_path / "logs").exists()


def test_a_host_that_pins_devices_exports_the_vendors_visibility_variable(root, tmp_path):
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: g0, devices: [2, 3, 5]}\n")
    (node,) = build(root, tmp_path, "gpt2_tiny:torch:H100:1:2").cases[0].rounds[0].nodes
    assert node.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    (node,) = build(root, tmp_path, "gpt2_tiny:torch:MI300X:1:2").cases[0].rounds[0].nodes
    assert node.env["HIP_VISIBLE_DEVICES"] == "2,3"
    (node,) = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:2").cases[0].rounds[0].nodes
    assert not any(k.endswith("VISIBLE_DEVICES") for k in node.env)  # a CPU has no devices to pin
    with pytest.raises(UserError, match=r"host g0 offers devices \[2, 3, 5\], but .* starts 4 process"):
        build(root, tmp_path, "gpt2_tiny:torch:H100:1:4")


def test_node_runtimes_are_registered_peers_and_the_container_one_plans_its_part(root, tmp_path):
    from run_benchmarks.backends import runtimes
    from run_benchmarks.backends.runtimes.container import ContainerRuntime
    from run_benchmarks.backends.runtimes.process import ProcessRuntime

    assert list(runtimes.RUNTIMES) == ["container", "process"]
    assert runtimes.get("process") is ProcessRuntime and runtimes.get("container") is ContainerRuntime
    with pytest.raises(UserError, match="unknown node runtime 'vm'"):
        runtimes.get("vm")
    (node,) = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:1").cases[0].rounds[0].nodes
    assert node.container is None and node.python == load_inputs(root).default_python

    write(root / "configs/cluster.yaml", "hosts:\n  - {name: box, runtime: container, data_root: /srv/data}\n")
    plan = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:1")
    (rnd,) = plan.cases[0].rounds
    (node,) = rnd.nodes
    assert node.python == "python"  # the image's interpreter, not the orchestrator's
    assert node.container.name == "accelbench-run-1-gpt2_tiny-torch-cpu-1x1-r1-n0"
    assert node.container.monitor_name == node.container.name + "-monitor"
    assert node.container.mounts == {str(node.cwd): "ro",
                                     str(rnd.dir): "rw", str(plan.dir / "cache"): "rw", "/srv/data": "ro"}
    assert not (tmp_path / "logs").exists()  # planning touched nothing


def test_devices_if_present_reach_only_containers_on_hosts_that_have_them(root, tmp_path):
    """InfiniBand for multi-node NCCL: passed where the host has it, not a failed start where it has none."""
    from run_benchmarks.catalog.config_files import HostSpec
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.backends.runtimes.container import ContainerRuntime

    present = write(tmp_path / "dev" / "infiniband" / "uverbs0", "")
    vendor = root / "vendors/cpu/vendor.yaml"
    vendor.write_text(vendor.read_text().replace("  torch:\n    env: {}\n", "  torch:\n    env: {}\n    container:\n"
        f"      devices: [/dev/null]\n      devices_if_present: [{present.parent}, {tmp_path / 'dev/absent'}]\n", 1))
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: box, runtime: container}\n")
    case = build(root, tmp_path, "gpt2_tiny:torch:cpu:1:1").cases[0]
    (node,) = case.rounds[0].nodes
    runtime = ContainerRuntime({"box": connect(HostSpec(name="box"))}, root)
    assert runtime._options(case, node).devices == ["/dev/null", str(present.parent)]


def test_host_backends_are_registered_and_local_hosts_stage_files(tmp_path):
    from run_benchmarks.catalog.config_files import HostSpec
    from run_benchmarks.backends.hosts import BACKENDS, connect
    from run_benchmarks.backends.hosts.local import LocalHost

    assert list(BACKENDS) == ["local", "ssh"]
    host = connect(HostSpec(name="here"))
    assert isinstance(host, LocalHost)
    target = tmp_path / "a" / "b"
    assert not host.exists(target)
    host.makedirs(target)
    host.makedirs(target)  # twice is fine
    host.write_text(target / "c" / "marker", "done\n")
    assert host.exists(target / "c" / "marker") and (target / "c" / "marker").read_text() == "done\n"

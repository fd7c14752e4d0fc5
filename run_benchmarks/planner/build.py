"""Case names + configs -> a RunPlan: per node its host, launcher argv, env and log paths.

Building a plan touches no host and starts nothing, so every input error
surfaces here, before anything runs; ``--dry-run`` prints the plan and stops.
"""
from __future__ import annotations

import math
from pathlib import Path, PurePosixPath
from typing import Optional

from training.contract import ports
from training.contract.names import ENV_NODE_RANK, ENV_VENDOR_DIR, MONITOR_MODULE
from training.contract.spec import RuntimeSpec, WorkerConfig, WorkloadSpec

from run_benchmarks.catalog import casename, compliance, contention_limits, frameworks, policy
from run_benchmarks.planner import checks
from run_benchmarks.backends.codesync import code_digest, remote_code_root
from run_benchmarks.catalog.config_files import CaseEntry, HostSpec
from run_benchmarks.catalog.config import Layer, merge, parse_assignment, validate_layered
from run_benchmarks.errors import UserError
from run_benchmarks.backends import launchers
from run_benchmarks.backends.launchers import NodeLaunch
from run_benchmarks.backends.runtimes import NodeSite, get as get_runtime
from run_benchmarks.backends.schedulers import get as get_scheduler
from run_benchmarks.plan import CasePlan, NodePlan, PlanInputs, RoundPlan, RunPlan


MAX_ROUNDS = 10_000  # rounds in one run, all case names together: each gets a port and a log folder


def build_run_plan(
    inputs: PlanInputs,
    case_names: list[str | CaseEntry],
    run_id: str,
    log_root: Path,
    extern_config: Optional[str] = None,
    assignments: tuple[str, ...] = (),
    timeout_s: Optional[float] = None,
) -> RunPlan:
    if not case_names:
        raise UserError("no case to run: give --case_name or list cases in "
                        f"{inputs.test_conf_path} (key 'cases')",
                        f"e.g. --case_name {casename.EXAMPLE}")
    entries = [item if isinstance(item, CaseEntry) else CaseEntry(case=item) for item in case_names]
    parsed = [casename.parse(entry.case) for entry in entries]
    rounds_needed = sum(name.repeat for name in parsed)
    if rounds_needed > MAX_ROUNDS:
        raise UserError(f"{len(parsed)} case name(s) ask for {rounds_needed} rounds in one run; at most {MAX_ROUNDS}",
                        "lower the repeat fields, or split the case names over several runs")
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise UserError(f"--timeout {timeout_s:g}: the deadline must be a finite number of seconds above 0",
                        f"e.g. --timeout 600; omit it for timeout_s of {inputs.test_conf_path} "
                        f"({inputs.test_conf.timeout_s:g} s)")
    checks.check_log_root(log_root, f"the log root (--log-root, or log_root in {inputs.test_conf_path})")
    run_dir = log_root / run_id
    plans, used_dirs = [], set()
    for name, entry in zip(parsed, entries):  # a test_conf entry's own config and settings; the command line wins
        case_dir = run_dir / _unique(name.slug, used_dirs)
        plans.append(_case_plan(inputs, name, run_id, case_dir, extern_config or entry.extern_config,
                                (*entry.assignments(), *assignments),
                                timeout_s if timeout_s is not None else inputs.test_conf.timeout_s))
    return RunPlan(run_id, run_dir, plans, inputs.cluster)


def build_case_plan(inputs: PlanInputs, case_name: str, run_id: str, case_dir: Path,
                    extern_config: Optional[str] = None, assignments: tuple[str, ...] = (),
                    timeout_s: Optional[float] = None) -> CasePlan:
    """One case planned into ``case_dir`` of run ``run_id`` with the same checks as a run's: a sweep's point,
    planned just before it runs, with its own extern config and settings."""
    return _case_plan(inputs, casename.parse(case_name), run_id, case_dir, extern_config, assignments,
                      timeout_s if timeout_s is not None else inputs.test_conf.timeout_s)


def _unique(slug: str, used: set[str]) -> str:
    candidate, n = slug, 2
    while candidate in used:
        candidate, n = f"{slug}-{n}", n + 1
    used.add(candidate)
    return candidate


def _case_plan(inputs: PlanInputs, name: casename.CaseName, run_id: str, case_dir: Path,
               extern_name: Optional[str], assignments: tuple[str, ...], timeout_s: float) -> CasePlan:
    framework = frameworks.get(name.framework)
    case = inputs.catalog.resolve(name.case)
    case_path = case.path
    if name.framework not in case.frameworks:
        raise UserError(f"case {name.case!r} has no {name.framework} workload ({case_path}: frameworks)",
                        f"use one of: {', '.join(case.frameworks)}")
    hardware = inputs.vendors.find_hardware(name.hardware)
    declared = hardware.vendor_spec.frameworks
    if name.framework not in declared:  # its image, container and env would be guessed: refused, not run silently
        vendor_file = hardware.vendor_dir / "vendor.yaml"
        raise UserError(f"case name {str(name)!r}: vendor {hardware.vendor} does not declare framework "
                        f"{name.framework} ({vendor_file}: frameworks lists {', '.join(declared) or 'none'})",
                        f"declare frameworks.{name.framework} in {vendor_file} (its env, and an image or "
                        f"docker/{name.framework}_<version>/), or run a framework it declares")
    hosts = inputs.cluster.node_hosts()
    if name.nnodes > len(hosts):
        where = (f"{inputs.cluster_path} lists {len(hosts)} host(s)" if inputs.cluster.scheduler == "hosts"
                 else f"{inputs.cluster.scheduler}.max_nodes of {inputs.cluster_path} is {len(hosts)}")
        raise UserError(f"case name {str(name)!r} asks for {name.nnodes} nodes but {where}",
                        f"lower nnodes to at most {len(hosts)}, or add hosts to {inputs.cluster_path}")

    layers = [Layer(source, layer) for source, layer in case.layers()]
    extern = inputs.catalog.read_extern(extern_name, hardware.vendor, name.case, name.framework) \
        if extern_name else None
    if extern is not None:  # a YAML file is one layer; a FlagPerf .py one per key (extern.py)
        layers += [Layer(source, layer) for source, layer in extern.layers]
    if inputs.test_conf.overrides:
        layers.append(Layer(f"{inputs.test_conf_path} (overrides)", inputs.test_conf.overrides))
    limits, assignments = contention_limits.split(assignments)  # the run's judgement, not the workload's
    contention = inputs.test_conf.contention.applied(limits)
    for text in assignments:
        layers.append(Layer(f"--set {text}", parse_assignment(text)))
    layered = merge(layers)
    workload = validate_layered(WorkloadSpec, layered, str(case_path))
    verdict = _judge(inputs, name, case, layered, workload, extern.path if extern else None, hardware.vendor_dir)
    checks.check_layout(workload, name, framework, layered, str(case_path))
    checks.check_delays(workload, name, layered, str(case_path))
    workload = checks.absolute_data_path(workload)
    checks.check_data_files(workload, hosts[:name.nnodes], layered, str(case_path))
    checks.check_local_cpu_processes(hardware, name, hosts[:name.nnodes], inputs.cluster_path)
    checks.check_local_pythons(hosts[:name.nnodes], inputs.cluster_path)

    vendor_runtime = hardware.vendor_spec.frameworks.get(name.framework)
    runtime_env = dict(vendor_runtime.env) if vendor_runtime else {}
    device_envs = [checks.visible_devices(host, hardware, name, inputs.cluster_path) for host in hosts[:name.nnodes]]
    # master_port auto: the plan binds nothing; whatever starts a round on its master host chooses the port
    # there (training/contract/ports.py) and the round's record keeps it.
    fixed_port = None if inputs.cluster.master_port == "auto" else inputs.cluster.master_port
    master_port = ports.PLACEHOLDER if fixed_port is None else fixed_port
    rounds = []
    for index in range(1, name.repeat + 1):
        round_dir = case_dir / f"round{index}"
        worker_config = WorkerConfig(workload=workload, runtime=RuntimeSpec(
            case_name=str(name), run_id=run_id, round=index, framework=name.framework,
            device=hardware.device_spec(name.framework)))
        nodes = [
            _node_plan(inputs, framework, name, hosts, node_rank, round_dir, master_port,
                       {**runtime_env, **device_envs[node_rank]}, monitored=bool(inputs.test_conf.monitor_interval_s),
                       vendor=(hardware.vendor, hardware.vendor_dir))
            for node_rank in range(name.nnodes)
        ]
        rounds.append(RoundPlan(index, round_dir, worker_config, nodes, fixed_port))
    return CasePlan(name, framework, hardware, case_path, extern.path if extern else None, workload,
                    layered.provenance, timeout_s, case_dir, rounds,
                    tuple(extern.notes_for(workload)) if extern else (), verdict, contention)


def _judge(inputs: PlanInputs, name: casename.CaseName, case, layered, workload: WorkloadSpec,
           extern_path: Optional[Path], vendor_dir: Path) -> Optional[compliance.Compliance]:
    """The workload against the case's policy, before any path in it is made absolute: the case's own value
    is what its files alone resolve to (catalog/compliance.py)."""
    baseline = validate_layered(WorkloadSpec, merge([Layer(source, layer) for source, layer in case.layers()]),
                                str(case.path))
    files = [Path(path) for path, _ in case.layers()] + ([extern_path] if extern_path else []) \
        + [vendor_dir / "vendor.yaml"]
    return compliance.judge(policy.load(inputs.paths.cases_dir, name.case), baseline, workload, name.world_size,
                            lambda key: layered.source_of(tuple(key.split(".")), ""), files, inputs.paths.root)


def _node_plan(inputs: PlanInputs, framework: frameworks.Framework, name: casename.CaseName,
               hosts: list[HostSpec], node_rank: int, round_dir: Path, port: int | str,
               vendor_env: dict[str, str], monitored: bool, vendor: tuple[str, Path]) -> NodePlan:
    host = hosts[node_rank]
    node_dir = round_dir / f"{host.name}_noderank{node_rank}"
    runtime = get_runtime(host.runtime)
    python = host.python or runtime.default_python(inputs.default_python)
    scheduler = get_scheduler(inputs.cluster.scheduler)
    if host.backend == "ssh" or scheduler.shared_folder:
        # The same layout under the host's work_root; code is copied to code/ (see hosts.ssh.sync_code).
        run_dir = round_dir.parent.parent
        remote_round = PurePosixPath(host.work_root) / "runs" / run_dir.name / round_dir.parent.name / round_dir.name
        code_root = remote_code_root(host.work_root, code_digest(inputs.paths.root))
        remote_dir = remote_round / node_dir.name
        host_node_dir, host_round, cache = remote_dir, remote_round, PurePosixPath(host.work_root) / "cache"
        vendor_dir = code_root / "vendors" / vendor[0]  # codesync copies every vendor there, packages' too
    else:
        remote_dir, code_root = None, inputs.paths.root
        host_node_dir, host_round, cache = node_dir, round_dir, round_dir.parent.parent / "cache"
        vendor_dir = vendor[1]  # in the checkout or an installed vendor package
    argv = launchers.get(framework.launcher).argv(NodeLaunch(
        python=python, nnodes=name.nnodes, nprocs_per_node=name.nprocs_per_node, node_rank=node_rank,
        master_addr=scheduler.master_address(hosts), master_port=port,
        local_addr=scheduler.node_address(host),
        log_dir=host_node_dir, worker_config=host_round / "config.json", code_root=code_root,
    ))
    env = {
        **vendor_env,
        "PYTHONPATH": str(code_root),
        "PYTHONUNBUFFERED": "1",
        # Launchers and compilers write to the temp dir; keep that inside the run so runs share nothing.
        "TMPDIR": str(host_node_dir / "tmp"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        ENV_NODE_RANK: str(node_rank),
        ENV_VENDOR_DIR: str(vendor_dir),  # the vendor's folder as the node sees it: {vendor_dir}
    }
    container = runtime.plan_node(NodeSite(
        host, round_dir.parent.parent.name, round_dir.parent.name, int(round_dir.name.removeprefix("round")),
        node_rank, code_root, host_round, cache, vendor_dir))
    monitor_argv = None
    if monitored:  # the accelerator monitor to run is the kind's, in the worker config
        monitor_argv = [python, "-m", MONITOR_MODULE, "--config", str(host_round / "config.json"),
                        "--interval", f"{inputs.test_conf.monitor_interval_s:g}", "--out", str(host_node_dir / "monitor")]
    return NodePlan(node_rank, host, python, argv, env, code_root, node_dir, remote_dir, container, monitor_argv)

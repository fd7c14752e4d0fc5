"""What a plan refuses before anything runs: a layout that does not fit, data files that are not there,
devices a host pins that the accelerator kind cannot export. Each error names the file that set the
value and the fix."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog import casename, frameworks
from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.catalog.config import Layered
from run_benchmarks.errors import UserError
from run_benchmarks.planner.layout import layout_problems


DELAYS = ("collective_delay_ms", "data_fetch_delay_ms", "compute_delay_ms")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # training/torch/breakdown_tp.py's (that imports torch)


def check_delays(workload: WorkloadSpec, name: casename.CaseName, layered: Layered, case_path: str) -> None:
    """The debug delays are injected by the training loops of both workers (pretrain, finetune, lora) and by
    torch's PPO loop (training/torch/ppo_loop.py and ppo_breakdown.py: prompts, makings and forward+backward, every
    DDP/FSDP/ZeRO-1 collective). Paddle's collective delay sits in its breakdown steps' timed collectives
    (training/paddle/breakdown.py): plain data parallel's explicit all-reduces; sharding stage1's reduces,
    broadcasts and, with data parallelism beside it, all-reduces (stage2's over the whole data group); tensor
    parallel's collectives on a CPU with nothing beside it. Not stage3, stage2 beside data parallelism, tensor
    parallel on an accelerator (its loss kernel all-reduces in C++) or beside data parallelism or sharding, whose
    breakdown is not measured. Torch's tensor-parallel delay sits in wrappers around torch's functional
    collectives (training/torch/breakdown_tp.py), which CUDA graphs (compile modes reduce-overhead, max-autotune,
    off a CPU) replay past."""
    delays = [k for k in DELAYS if getattr(workload.debug, k) is not None]
    if not delays or workload.debug.collective_delay_ms is None:
        return
    par = workload.parallel
    data = par.data_degree(name.world_size)
    whole_group = par.sharding_parallel_degree in (None, data)  # no data parallelism beside the sharding
    source = layered.provenance.get(("debug", "collective_delay_ms"), case_path)
    if (name.framework == "paddle" and par.sharding != "none" and data > 1 and par.tensor_parallel_degree == 1
            and (par.sharding == "stage3" or not (whole_group or par.sharding == "stage1"))):
        beside = "" if whole_group else f" on {par.sharding_parallel_degree} of {data} data ranks"
        raise UserError(f"debug.collective_delay_ms (set in {source}) delays Paddle's plain data-parallel "
                        "all-reduces, sharding stage1's collectives (data parallelism beside it or not) and stage2's "
                        f"over the whole data group only; sharding {par.sharding}{beside} runs collectives the "
                        "breakdown does not time one by one",
                        "unset debug.collective_delay_ms, or set parallel.sharding=none or stage1")
    if par.tensor_parallel_degree == 1:
        return
    if name.framework == "paddle" and (data > 1 or name.hardware != "cpu"):
        where = (f"beside {data} data-parallel or sharding ranks" if data > 1 else
                 f"on {name.hardware}, where its loss kernel all-reduces inside C++")
        raise UserError(f"debug.collective_delay_ms (set in {source}) delays Paddle's tensor-parallel collectives "
                        f"on a CPU with nothing beside them only; tensor parallel {where} runs collectives the "
                        "breakdown does not time one by one",
                        "unset debug.collective_delay_ms, or run tensor parallel alone on cpu")
    if workload.train.compile in CUDA_GRAPH_MODES and name.hardware != "cpu":
        raise UserError(f"debug.collective_delay_ms (set in {source}) cannot reach tensor parallel's collectives "
                        f"under train.compile={workload.train.compile}: its CUDA graphs replay them without "
                        "calling them",
                        "unset debug.collective_delay_ms, or set train.compile=default")


def check_layout(workload: WorkloadSpec, name: casename.CaseName, framework: frameworks.Framework,
                  layered: Layered, case_path: str) -> None:
    problems = layout_problems(workload, name)
    unsupported = framework.unsupported(workload, name.world_size)
    if not problems and not unsupported:
        return
    sources = sorted({source for key, source in layered.provenance.items() if key[0] == "parallel" and len(key) > 1}
                     or {case_path})
    if problems:
        raise UserError(f"inconsistent parallel layout (set in {', '.join(sources)}):\n  " + "\n  ".join(problems),
                        "make data x tensor x pipeline degrees equal nnodes x nprocs_per_node, and fit them "
                        "to the model's heads and layers")
    raise UserError(f"{framework.name} workloads cannot run this layout yet (set in {', '.join(sources)}): "
                    + "; ".join(unsupported), "choose a layout from README's strategy table")


def absolute_data_path(workload: WorkloadSpec) -> WorkloadSpec:
    """A relative data.path means relative to where accelbench was started (workers start elsewhere)."""
    path = workload.data.path
    if path is None or Path(path).is_absolute():
        return workload
    data = workload.data.model_copy(update={"path": str(Path(path).resolve())})
    return workload.model_copy(update={"data": data})


def check_data_files(workload: WorkloadSpec, hosts: list[HostSpec], layered: Layered, case_path: str) -> None:
    """A dataset on this machine is checked now, not after every node has started and failed on it."""
    data = workload.data
    if data.path is None or any(host.backend != "local" for host in hosts):
        return
    needed = [Path(data.path)] if data.source == "instruction" else [
        Path(f"{data.path}_ids.npy"), Path(f"{data.path}_idx.npz")]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        source = layered.source_of(("data", "path"), case_path)
        raise UserError(f"data.path (set in {source}): {', '.join(missing)} not found",
                        "point data.path at an existing file (tokens: the prefix of <prefix>_ids.npy and "
                        "<prefix>_idx.npz); make a sample with `python -m training.data.make_dataset --help`")


def visible_devices(host: HostSpec, hardware, name: casename.CaseName, cluster_path: Path) -> dict[str, str]:
    """The node's devices, through the vendor's visibility variable, when the host pins them."""
    if host.devices is None:
        return {}
    variable = hardware.kind.visible_devices_env
    if not variable:
        if hardware.on_cpu:
            return {}
        raise UserError(f"{cluster_path}: host {host.name} pins devices, but accelerator kind {hardware.spec.kind!r} "
                        "declares no visible_devices_env", f"set kinds.{hardware.spec.kind}.visible_devices_env, or "
                                                           f"remove devices from host {host.name}")
    if len(host.devices) < name.nprocs_per_node:
        raise UserError(f"{cluster_path}: host {host.name} offers devices {host.devices}, but {name} starts "
                        f"{name.nprocs_per_node} process(es) per node", "list at least one device per process")
    return {variable: ",".join(str(d) for d in host.devices[:name.nprocs_per_node])}


def check_folder(path: Path, what: str, writable: bool = False) -> None:
    """``path`` is a folder, or can be made one: nothing but folders on the way to it (and, when
    ``writable``, the nearest existing one accepts writes)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be made: {existing} is a file"
        raise UserError(f"{what} {path} {where}, not a folder", "point it at a folder (it is made if missing)")
    if writable and not os.access(existing, os.W_OK):
        raise UserError(f"{what} {path}: {existing} is not writable (read-only filesystem, or no permission)",
                        "point it at a folder you can write to")


def check_file(path: Path, what: str, writable: bool = False) -> None:
    """``path`` is a file, or can be made one in a folder."""
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder, not a file", f"give a file path, e.g. {path / 'results.db'}")
    check_folder(path.parent, f"{what} {path}: its folder", writable)


def check_log_root(log_root: Path, what: str) -> None:
    check_folder(log_root, what)


# CPU workers beyond this many per core measure the contention of the machine, not the workload.
CPU_PROCESSES_PER_CORE = 4


def local_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_local_cpu_processes(hardware, name: casename.CaseName, hosts: list[HostSpec], cluster_path: Path) -> None:
    """CPU workers on this machine share its cores: every local node of the case together."""
    if not hardware.on_cpu:
        return  # counted kinds are checked against the devices at preflight
    local = [host for host in hosts if host.backend == "local"]
    if not local:
        return
    cores = local_cores()
    limit = cores * CPU_PROCESSES_PER_CORE
    total = name.nprocs_per_node * len(local)
    if total > limit:
        nodes = f"{len(local)} local node(s) x " if len(local) > 1 else ""
        raise UserError(f"case name {str(name)!r} starts {nodes}{name.nprocs_per_node} CPU worker(s) on this machine "
                        f"({cluster_path}), which has {cores} core(s); at most {limit} ({CPU_PROCESSES_PER_CORE} "
                        "per core)", f"lower nprocs_per_node to {max(1, limit // len(local))} or less, or place "
                                     "nodes on other hosts")


def check_local_pythons(hosts: list[HostSpec], cluster_path: Path) -> None:
    """A local host's interpreter is checked now, not when its launcher fails to start."""
    for host in hosts:
        if host.backend != "local" or host.runtime != "process" or not host.python:
            continue
        python = host.python
        found = shutil.which(python) if os.sep not in python else (
            python if os.path.isfile(python) and os.access(python, os.X_OK) else None)
        if found is None:
            raise UserError(f"{cluster_path}: host {host.name}: python {python!r} is not an executable on this "
                            "machine", "set hosts[].python to an existing interpreter (e.g. /usr/bin/python3), or "
                                       "remove it to use accelbench's own")


def refuse_non_compliant(cases) -> None:
    """``--strict``: a case that departs from its case's policy (or has none to be judged by) is refused
    before anything runs, every departure named; without it the run goes on, marked non-compliant."""
    lines = []
    for case in cases:
        verdict = case.compliance
        if verdict is None:
            lines.append(f"{case.name}: no policy to judge it by (cases/policy.yaml is missing from the tree)")
        elif not verdict.compliant:
            lines.append(f"{case.name} departs from its case's policy:")
            lines += [f"  {d.sentence()}" for d in verdict.departures]
    if lines:
        raise UserError("--strict: " + "\n".join(lines),
                        "remove the departing settings (--set, the extern config, test_conf overrides), or run "
                        "without --strict to record the run marked non-compliant")

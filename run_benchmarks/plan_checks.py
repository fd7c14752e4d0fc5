"""What a plan refuses before anything runs: a layout that does not fit, data files that are not there,
devices a host pins that the accelerator kind cannot export. Each error names the file that set the
value and the fix."""
from __future__ import annotations

from pathlib import Path

from training.spec import WorkloadSpec

from . import casename, frameworks
from .config import HostSpec, Layered
from .errors import UserError
from .layout import layout_problems


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

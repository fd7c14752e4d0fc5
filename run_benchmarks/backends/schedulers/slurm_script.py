"""The files a Slurm round is submitted as, written by accelbench: the ``sbatch`` argv, the batch script
(runs on the job's first node: finds the master's address, starts one task per node with ``srun``) and
the node script (each task: its node's launcher, picked by ``SLURM_NODEID``).

Every value that comes from a plan (paths, case names, environment) is quoted with ``shlex.quote``;
what is known only inside the job is written in as ``"$master_addr"``, ``"$node_addr"`` and
``"$master_port"``. The addresses are the nodes' ``NodeAddr`` from ``scontrol``, since node names may not
resolve. With ``master_port: auto`` the batch script, running on the job's first node (the master), chooses
the port there (training/contract/ports.py, run as the launchers run: in the site's container where there is
one), exports it to every task, and writes it to node 0's folder for the round's record.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Sequence

from training.contract import ports
from training.contract.names import PORT_SCRIPT

from run_benchmarks.catalog.config_files import SlurmSpec
from run_benchmarks.backends.schedulers.base import auto_port

if TYPE_CHECKING:
    from run_benchmarks.plan import CasePlan, NodePlan, RoundPlan

MASTER_ADDR = "@ACCELBENCH_MASTER_ADDR@"  # placeholders in a planned argv, replaced inside the job
NODE_ADDR = "@ACCELBENCH_NODE_ADDR@"
_PLACEHOLDER = re.compile(f"({re.escape(MASTER_ADDR)}|{re.escape(NODE_ADDR)}|{re.escape(ports.PLACEHOLDER)})")
_IN_JOB = {MASTER_ADDR: '"$master_addr"', NODE_ADDR: '"$node_addr"', ports.PLACEHOLDER: '"$master_port"'}
EXIT_FILE = "exit_code"  # the node's launcher exit code, written by the node script
NODE_FILE = "slurm_node.txt"  # "<node name> <address> <job id>", written by the node script
_ADDRESS_OF = "scontrol show node -o \"$1\" | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p'"


def shell_word(arg: str) -> str:
    """One argument as a shell word: quoted, with what only the job knows substituted where planned."""
    out = []
    for part in _PLACEHOLDER.split(arg):
        if part in _IN_JOB:
            out.append(_IN_JOB[part])
        elif part:
            out.append(shlex.quote(part))
    return "".join(out) or "''"


def _array(name: str, argv: Sequence[str]) -> str:
    return f"{name}=(" + " ".join(shell_word(a) for a in argv) + ")"


def round_folder(rnd: "RoundPlan") -> PurePosixPath:
    """The round's folder in the shared directory (the parent of its nodes' folders)."""
    return PurePosixPath(rnd.nodes[0].host_dir).parent


def job_name(case: "CasePlan", rnd: "RoundPlan") -> str:
    run_id = rnd.worker_config.runtime.run_id
    return f"accelbench-{run_id}-{case.dir.name}-r{rnd.index}"


def sbatch_argv(spec: SlurmSpec, case: "CasePlan", rnd: "RoundPlan", script: PurePosixPath) -> list[str]:
    folder = round_folder(rnd)
    argv = ["sbatch", "--parsable", f"--job-name={job_name(case, rnd)}", f"--nodes={case.name.nnodes}",
            "--ntasks-per-node=1", f"--partition={spec.partition}", f"--time={spec.time_limit}", "--no-requeue",
            f"--chdir={folder}", f"--output={folder / 'slurm-%j.out'}"]
    argv += [f"--account={spec.account}"] if spec.account else []
    argv += [f"--qos={spec.qos}"] if spec.qos else []
    argv += [f"--gpus-per-node={spec.gpus_per_node}"] if spec.gpus_per_node else []
    argv += [f"--gres={spec.gres}"] if spec.gres else []
    argv += ["--exclusive"] if spec.exclusive else []
    return [*argv, *spec.sbatch_options, str(script)]


def batch_script(spec: SlurmSpec, case: "CasePlan", rnd: "RoundPlan", node_script: PurePosixPath) -> str:
    nnodes = case.name.nnodes
    srun = ["srun", f"--nodes={nnodes}", f"--ntasks={nnodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    container = spec.container
    if container is not None and container.kind == "pyxis":
        mounts = ",".join([f"{spec.shared_dir}:{spec.shared_dir}", *container.mounts])
        srun += [f"--container-image={container.image}", f"--container-mounts={mounts}", *container.options]
    lines = [
        "#!/bin/bash",
        f"# accelbench: {shlex.quote(str(case.name))} round {rnd.index}; written by accelbench, every value "
        "from the plan quoted",
        "set -u",
        f"address_of() {{ {_ADDRESS_OF}; }}",
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'master_addr=$(address_of "$first")',
        'export ACCELBENCH_MASTER_ADDR="${master_addr:-$first}"',
        *(_port_lines(spec, rnd) if auto_port(rnd) else []),
        "exec " + " ".join(shlex.quote(a) for a in srun) + " /bin/bash " + shlex.quote(str(node_script)),
    ]
    return "\n".join(lines) + "\n"


def _port_lines(spec: SlurmSpec, rnd: "RoundPlan") -> list[str]:
    """master_port auto: chosen here, on the job's first node, by node 0's interpreter as its launcher runs
    (in the site's container: Apptainer around it, or a one-task Pyxis step pinned to this node)."""
    master = rnd.nodes[0]
    words = [shlex.quote(a) for a in _contained(spec, [master.python, str(master.cwd / PORT_SCRIPT)])]
    container = spec.container
    if container is not None and container.kind == "pyxis":
        mounts = ",".join([f"{spec.shared_dir}:{spec.shared_dir}", *container.mounts])
        step = ["srun", "--nodes=1", "--ntasks=1", f"--container-image={container.image}",
                f"--container-mounts={mounts}", *container.options]
        words = [*(shlex.quote(a) for a in step), '--nodelist="$first"', *words]
    record = shlex.quote(str(master.host_dir / ports.PORT_FILE))
    return [
        f"master_port=$({' '.join(words)})",
        'case "$master_port" in ""|*[!0-9]*) echo "accelbench: no master port could be chosen on $first" >&2; '
        "exit 3 ;; esac",
        'export ACCELBENCH_MASTER_PORT="$master_port"',
        f"mkdir -p {shlex.quote(str(master.host_dir))} && printf '%s\\n' \"$master_port\" > {record}",
    ]


def node_script(spec: SlurmSpec, rnd: "RoundPlan") -> str:
    lines = [
        "#!/bin/bash",
        "# One task per node: the launcher of the node SLURM_NODEID names, its exit code kept beside its logs.",
        "set -u",
        f"address_of() {{ {_ADDRESS_OF}; }}",
        'master_addr=$ACCELBENCH_MASTER_ADDR',
        *(['master_port=$ACCELBENCH_MASTER_PORT'] if auto_port(rnd) else []),
        'node_addr=$(address_of "$SLURMD_NODENAME")',
        'node_addr=${node_addr:-$(hostname)}',
        'monitor=()',
        'case "$SLURM_NODEID" in',
    ]
    for node in rnd.nodes:
        lines += [f"  {node.node_rank})", f"    dir={shlex.quote(str(node.host_dir))}"]
        lines += [f"    export {key}={shell_word(value)}" for key, value in sorted(_node_env(node).items())]
        lines.append("    " + _array("launcher", _contained(spec, node.argv)))
        if node.monitor_argv is not None:
            lines.append("    " + _array("monitor", _contained(spec, node.monitor_argv)))
        lines.append("    ;;")
    lines += [
        '  *) echo "accelbench: the plan has no node $SLURM_NODEID" >&2; exit 2 ;;',
        "esac",
        'mkdir -p "$dir/tmp"',
        f'printf \'%s %s %s\\n\' "$SLURMD_NODENAME" "$node_addr" "$SLURM_JOB_ID" > "$dir/{NODE_FILE}"',
        'mon=""',
        'if [ ${#monitor[@]} -gt 0 ]; then "${monitor[@]}" > "$dir/monitor.log" 2>&1 & mon=$!; fi',
        '"${launcher[@]}" > "$dir/launcher.log" 2>&1 &',
        "child=$!",
        # Slurm's TERM (scancel, time limit) goes to the launcher; the exit code is still written.
        "trap 'kill -TERM $child 2>/dev/null' TERM INT HUP",
        'wait "$child"; code=$?',
        'while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done',
        f'echo "$code" > "$dir/{EXIT_FILE}.tmp" && mv "$dir/{EXIT_FILE}.tmp" "$dir/{EXIT_FILE}"',
        'if [ -n "$mon" ]; then kill -TERM "$mon" 2>/dev/null; wait "$mon"; fi',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def _node_env(node: "NodePlan") -> dict[str, str]:
    from run_benchmarks.backends.runtimes.base import job_env
    return job_env(node)


def _contained(spec: SlurmSpec, argv: Sequence[str]) -> list[str]:
    """``apptainer exec`` around a command when the site runs the vendor's image with Apptainer."""
    container = spec.container
    if container is None or container.kind != "apptainer":
        return list(argv)
    binds = [f"{spec.shared_dir}:{spec.shared_dir}", *container.mounts]
    return ["apptainer", "exec", *[x for bind in binds for x in ("--bind", bind)], *container.options,
            container.image, *argv]


def write_round_files(spec: SlurmSpec, case: "CasePlan", rnd: "RoundPlan") -> tuple[list[str], Path]:
    """Write the batch and node scripts into the round's shared folder; the sbatch argv to submit them."""
    folder = Path(round_folder(rnd))
    folder.mkdir(parents=True, exist_ok=True)
    node_path, job_path = folder / "node.sh", folder / "job.sbatch"
    node_path.write_text(node_script(spec, rnd), encoding="utf-8")
    job_path.write_text(batch_script(spec, case, rnd, PurePosixPath(node_path)), encoding="utf-8")
    return sbatch_argv(spec, case, rnd, PurePosixPath(job_path)), job_path

"""FlagPerf's own options on ``start_task.py``, so the command from FlagPerf's guides works as it is.

FlagPerf starts a case per node with the case's facts said again beside the case name (``--nnodes``,
``--nproc``, ``--model_name``, ``--vendor``, ``--round``), where it runs (``--hosts``, ``--hosts_ports``,
``--master_addr``, ``--master_port``, and this node's ``--host_addr``/``--node_rank``) and its folders. Each option
is mapped onto accelbench's own input or refused with why (README, "FlagPerf's options", has the table); a
fact said twice must agree, and a contradiction is a UserError (exit 2) naming both. Two steps: ``parse``
before anything is read (what the command line alone says, so the log root is checked with the others), and
``FlagPerfRun.prepare`` once the configs are loaded (the hardware's vendor and kind, the case's task, the
cluster these options make). What each option became is printed with the plan.
"""
from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Optional

from training.contract.names import WORKER_SCRIPT

from run_benchmarks.catalog import casename
from run_benchmarks.catalog.config_files import ClusterSpec, HostSpec
from run_benchmarks.cli.flagperf_inputs import LOOPBACK, addresses_of, data_settings, host_specs, ports_of
from run_benchmarks.errors import UserError
from run_benchmarks.plan import PlanInputs
from run_benchmarks.planner.inputs import split_case_names

OPTIONS = ("vendor", "model_name", "train_script", "nnodes", "nproc", "hosts", "hosts_ports", "data_dir", "log_dir",
           "log_level", "enable_extern_config", "extern_config_dir", "master_port", "round", "visible_dev_env",
           "master_addr", "node_rank", "host_addr")
# FlagPerf's per-framework start scripts (training/run_benchmarks/<folder>/...): the framework each starts.
SCRIPTS = {"paddle": "paddle/start_paddle_task.py", "torch": "pytorch/start_pytorch_task.py"}
EXAMPLES = {"paddle": "gpt3_tiny:paddle:cpu:1:2", "torch": casename.EXAMPLE}
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
HOSTS_SOURCE = Path("--hosts")  # where messages say the cluster came from


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "FlagPerf's options", "accepted as FlagPerf's start_task passes them; each is mapped onto the run or checked "
                              "against it (README, \"FlagPerf's options\"), and a contradiction stops with exit 2")
    group.add_argument("--vendor", help="checked: the vendor that declares the case name's hardware")
    group.add_argument("--model_name", help="checked: the case name's case")
    group.add_argument("--train_script", help=f"checked: {PurePath(WORKER_SCRIPT).name}, the worker of every case")
    group.add_argument("--nnodes", type=int, help="checked: the case name's nnodes")
    group.add_argument("--nproc", type=int, help="checked: the case name's nprocs_per_node")
    group.add_argument("--round", type=int, help="the case name's repeat (checked against a 6th field)")
    group.add_argument("--hosts", help="the nodes' hosts, comma-separated, in node order: 127.0.0.1/localhost is "
                                       "this machine; any other is reached over SSH (host keys checked, never added)")
    group.add_argument("--hosts_ports", help="the SSH port of the --hosts (one for all, or one per host)")
    group.add_argument("--master_addr", help="checked: node 0's host (the first of --hosts)")
    group.add_argument("--master_port", type=int, help="the rendezvous port of every round")
    group.add_argument("--host_addr", help="checked: node 0's host (accelbench starts every node from here)")
    group.add_argument("--node_rank", type=int, help="checked: 0 (accelbench starts every node from here)")
    group.add_argument("--data_dir", help="the dataset: data.source tokens and data.path <data_dir>/<prefix> of "
                                          "the one <prefix>_ids.npy + <prefix>_idx.npz there")
    group.add_argument("--log_dir", help="the log root (as --log-root)")
    group.add_argument("--log_level", help=f"accepted: {', '.join(LOG_LEVELS)} (accelbench has one output level)")
    group.add_argument("--visible_dev_env", help="checked: the accelerator kind's visible-devices variable")
    group.add_argument("--enable_extern_config", action="store_true", help="implied: an extern config named is read")
    group.add_argument("--extern_config_dir", help="the folder --extern_config_file is found in (FlagPerf's "
                                                   "<vendor>/<case>-<framework>/config); default: the vendor's "
                                                   "vendors/<vendor>/<case>/<framework>/")


@dataclass
class FlagPerfRun:
    """The options given, and what each became (``notes``, printed with the plan)."""

    options: dict
    notes: list[str] = field(default_factory=list)

    def __getattr__(self, name: str):
        if name in OPTIONS:
            return self.options.get(name)
        raise AttributeError(name)

    def prepare(self, args: argparse.Namespace, inputs: PlanInputs) -> PlanInputs:
        """What needs the loaded configs: the hardware's vendor and kind, the case's data, the cluster."""
        names = [casename.parse(text) for text in split_case_names(args.case_names)]
        check_hardware(names, inputs, (self.vendor, f"--vendor {self.vendor}"),
                       (self.visible_dev_env, f"--visible_dev_env {self.visible_dev_env}"), self.notes)
        inputs = self._cluster(inputs)
        if self.hosts is not None and names and len(inputs.cluster.hosts) > max(n.nnodes for n in names):
            most = max(n.nnodes for n in names)
            raise UserError(f"--hosts {self.hosts[:200]}: {len(inputs.cluster.hosts)} hosts for a case of {most} "
                            f"node(s) ({', '.join(str(n) for n in names)}); the others would sit idle while the "
                            "case reads as if it ran on them", f"name one host per node: {most} in --hosts, in "
                                                               "node order (or raise nnodes in the case name)")
        if self.data_dir is not None:
            args.assignments = [*self._data(names, inputs), *args.assignments]
        return inputs

    # ------------------------------------------------------------ where the nodes run

    def _cluster(self, inputs: PlanInputs) -> PlanInputs:
        cluster, source = inputs.cluster, inputs.cluster_path
        hostish = [f"--{o} {self.options[o]}" for o in ("hosts", "hosts_ports", "master_addr", "master_port",
                                                          "host_addr", "node_rank") if self.options.get(o) is not None]
        if cluster.scheduler != "hosts" and hostish:
            raise UserError(f"{', '.join(hostish)}: the nodes come from Slurm ({source})",
                            "leave FlagPerf's host options out with a Slurm --cluster file")
        if self.hosts is not None:
            cluster, source = ClusterSpec(hosts=self._host_specs(), master_port=self.master_port or "auto"), HOSTS_SOURCE
        else:
            if self.hosts_ports is not None:
                ports = {h.port for h in cluster.hosts if h.backend == "ssh"} or {"(none: no SSH host)"}
                _agree(set(_ports(self.hosts_ports, len(cluster.hosts))) <= ports,
                       f"--hosts_ports {self.hosts_ports}", f"the SSH ports of {source}: {sorted(map(str, ports))}")
            if self.master_port is not None:
                _agree(cluster.master_port in ("auto", self.master_port), f"--master_port {self.master_port}",
                       f"master_port {cluster.master_port} of {source}")
                cluster = cluster.model_copy(update={"master_port": self.master_port})
        first = cluster.hosts[0]
        for option in ("master_addr", "host_addr"):
            value = self.options.get(option)
            if value is not None:
                _agree(_same_host(value, first.address), f"--{option} {value}",
                       f"node 0's host {first.name} at {first.address} ({source})")
                self.notes.append(f"--{option} {value}: node 0's host, as the plan has it")
        if self.node_rank is not None:
            if self.node_rank != 0:
                raise UserError(f"--node_rank {self.node_rank}: accelbench starts every node of the case from this one "
                                "command (FlagPerf starts one per node)", "run start_task.py once, on node 0's "
                                                                         "machine, with --node_rank 0 or without it")
            self.notes.append("--node_rank 0: this command starts every node (FlagPerf's one command per node is "
                              "not needed)")
        if self.master_port is not None:
            self.notes.append(f"--master_port {self.master_port}: the rendezvous port of every round")
        return replace(inputs, cluster=cluster, cluster_path=source)

    def _host_specs(self) -> list[HostSpec]:
        said = f"--hosts {self.hosts!r}"
        addresses = addresses_of(re.split(r"[,\s]+", self.hosts), said)
        ports = _ports(self.hosts_ports, len(addresses)) if self.hosts_ports else [22] * len(addresses)
        specs, notes = host_specs(addresses, ports, "--hosts", "--hosts_ports" if self.hosts_ports else None)
        self.notes += notes
        return specs

    # ------------------------------------------------------------ data

    def _data(self, names: list[casename.CaseName], inputs: PlanInputs) -> list[str]:
        folder = Path(self.data_dir).expanduser().resolve()
        remote = any(h.backend != "local" for h in inputs.cluster.hosts)
        sets: dict[str, str] = {}
        for name in names:
            found = data_settings(inputs.catalog.resolve(name.case).task, name.case, folder,
                                  f"--data_dir {self.data_dir}", remote)
            if sets and sets != found:
                raise UserError(f"--data_dir {self.data_dir}: the cases named read different data",
                                "give one case name with --data_dir")
            sets = found
        self.notes.append(f"--data_dir {self.data_dir}: data.source {sets['data.source']}, "
                          f"data.path {sets['data.path']}")
        return [f"{key}={json.dumps(value)}" for key, value in sets.items()]


def check_hardware(names: list[casename.CaseName], inputs: PlanInputs, vendor: tuple[Optional[str], str],
                   visible: tuple[Optional[str], str], notes: list[str]) -> None:
    """The vendor and visible-devices variable FlagPerf states (value, and how it was said) against each case
    name's hardware; "" for the variable is a kind without one."""
    for name in names:
        hardware = inputs.vendors.find_hardware(name.hardware)
        if vendor[0] is not None:
            _agree(vendor[0] == hardware.vendor, vendor[1], f"hardware {name.hardware} of {name}, which vendor "
                   f"{hardware.vendor} declares ({hardware.vendor_dir / 'vendor.yaml'})")
        if visible[0] is not None:
            variable = hardware.kind.visible_devices_env
            _agree(visible[0] == (variable or ""), visible[1],
                   f"accelerator kind {hardware.spec.kind} of hardware {name.hardware}, whose variable is "
                   f"{variable or '(none: its devices are not picked by a variable)'}")
    if vendor[0] is not None:
        notes.append(f"{vendor[1]}: agrees with the case name's hardware")
    if visible[0] is not None:
        notes.append(f"{visible[1]}: agrees with the accelerator kind (devices pinned per host with hosts[].devices "
                     "of a --cluster file)")


def _ports(text: str, hosts: int) -> list[int]:
    return ports_of(re.split(r"[,\s]+", text), hosts, f"--hosts_ports {text!r}")


def _same_host(a: str, b: str) -> bool:
    return a == b or (a in LOOPBACK and b in LOOPBACK)


def _agree(agrees: bool, said: str, other: str) -> None:
    if not agrees:
        raise UserError(f"{said} contradicts {other}", "say the same in both, or leave the FlagPerf option out")


def parse(args: argparse.Namespace) -> Optional[FlagPerfRun]:
    """What the command line alone says: the case name's facts, the script, the log root. None without any
    FlagPerf option. ``args`` gets the log root and each case name's repeat; the rest waits for ``prepare``."""
    options = {o: getattr(args, o, None) for o in OPTIONS}
    options["enable_extern_config"] = options["enable_extern_config"] or None
    if all(v is None for v in options.values()):
        return None
    run = FlagPerfRun(options)
    if run.master_port is not None and not 1 <= run.master_port <= 65535:
        raise UserError(f"--master_port {run.master_port}: not a port", "a port from 1 to 65535, e.g. 29301")
    texts = split_case_names(args.case_names)
    if not texts:
        raise UserError("FlagPerf's options describe one case, and no --case_name was given",
                        f"add --case_name, e.g. {casename.EXAMPLE}")
    args.case_names = [_case_name(run, text) for text in texts]
    if run.train_script is not None:
        _agree(PurePath(run.train_script).name == PurePath(WORKER_SCRIPT).name, f"--train_script {run.train_script}",
               f"the worker accelbench runs for every case, {WORKER_SCRIPT} (a case's own script is not run)")
        run.notes.append(f"--train_script {run.train_script}: agrees ({WORKER_SCRIPT} runs every case)")
    if run.log_level is not None:
        if run.log_level.lower() not in LOG_LEVELS:
            raise UserError(f"--log_level {run.log_level!r}: not a log level", f"one of {', '.join(LOG_LEVELS)}")
        run.notes.append(f"--log_level {run.log_level}: accepted; accelbench has one output level (the plan, "
                         "progress, results; --dry-run shows every launcher argv and variable)")
    if run.log_dir is not None:
        log_dir = Path(run.log_dir).expanduser()
        if args.log_root is not None:
            _agree(args.log_root.resolve() == log_dir.resolve(), f"--log_dir {run.log_dir}", f"--log-root {args.log_root}")
        args.log_root = log_dir
        run.notes.append(f"--log_dir {run.log_dir}: the log root (run folders go under {log_dir.resolve()})")
    if run.hosts is not None and args.cluster is not None:
        raise UserError(f"--hosts {run.hosts} and --cluster {args.cluster} both say where the nodes run",
                        "give one of them")
    if run.data_dir is not None:
        given = [a for a in args.assignments if a.split("=", 1)[0].strip() in ("data.path", "data.source")]
        if given:
            raise UserError(f"--data_dir {run.data_dir} and --set {given[0]} both say what the data is",
                            "give one of them")
    if run.extern_config_dir is not None:
        args.extern_config = _extern_in(run, args.extern_config)
    if run.enable_extern_config:
        run.notes.append("--enable_extern_config: implied (an extern config named is always read)"
                         + ("" if args.extern_config else "; none was named, so the case's own settings run"))
    return run


def _extern_in(run: FlagPerfRun, name: Optional[str]) -> str:
    """``--extern_config_file NAME`` found in ``--extern_config_dir``: that file, as a path."""
    from run_benchmarks.catalog import extern

    said = f"--extern_config_dir {run.extern_config_dir}"
    if name is None:
        raise UserError(f"{said}: it says where --extern_config_file is found, and no --extern_config_file was given",
                        "add --extern_config_file config_X.py, or leave --extern_config_dir out")
    folder = Path(run.extern_config_dir).expanduser().resolve()
    if not folder.is_dir():
        raise UserError(f"{said}: {folder} is not a folder on this machine",
                        "leave it out: the config is then found in vendors/<vendor>/<case>/<framework>/ (`accelbench "
                        "vendor import-flagperf` moves FlagPerf's <vendor>/<case>-<framework>/config there); or "
                        "name the folder that holds it")
    path, notes = extern.find(name, folder, said)
    run.notes += [*notes, f"{said}: the extern config is {path}"]
    return str(path)


def check_script(case_names: list[str], framework: str) -> None:
    """FlagPerf's ``paddle/start_paddle_task.py`` starts Paddle cases, ``pytorch/start_pytorch_task.py`` torch
    ones: a case name of the other framework (or none) is refused naming the script to use."""
    script = SCRIPTS[framework]
    texts = split_case_names(case_names)
    if not texts:
        raise UserError(f"{script} starts the case --case_name names, and none was given",
                        f"add --case_name, e.g. {EXAMPLES[framework]}")
    for text in texts:
        name = casename.parse(text)
        if name.framework != framework:
            other = SCRIPTS.get(name.framework)
            raise UserError(f"{script} starts {framework} cases, and {text} is a {name.framework} case",
                            f"run it with {other}" if other else f"name a {framework} case")


def _case_name(run: FlagPerfRun, text: str) -> str:
    name = casename.parse(text)
    for option, value, field_name in (("model_name", name.case, "case"), ("nnodes", name.nnodes, "nnodes"),
                                      ("nproc", name.nprocs_per_node, "nprocs_per_node")):
        given = run.options.get(option)
        if given is not None:
            _agree(given == value, f"--{option} {given}", f"the case name {text}'s {field_name} {value}")
            run.notes.append(f"--{option} {given}: agrees with the case name")
    if run.round is None:
        return text
    if len(text.strip().split(":")) == 6:
        _agree(run.round == name.repeat, f"--round {run.round}", f"the case name {text}'s repeat {name.repeat}")
        run.notes.append(f"--round {run.round}: agrees with the case name's repeat")
        return text
    repeated = str(replace(name, repeat=casename.parse(f"{text}:{run.round}").repeat))
    run.notes.append(f"--round {run.round}: the case runs {run.round} round(s) ({repeated})")
    return repeated

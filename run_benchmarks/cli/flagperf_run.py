"""FlagPerf's ``run.py`` (training/run_benchmarks/run.py): every case of ``config/test_conf.py``'s ``CASES``, each
with its data folder, on the hosts of ``config/cluster_conf.py``, as one accelbench run.

The files are read without running them (catalog/flagperf_conf.py) before anything else: a file that calls,
imports or names something unknown stops with exit 2 and nothing planned. Every ``accelbench run`` option works
as well (``--dry-run`` plans every case and prints what each key became); ``--cluster FILE`` takes the hosts from
an accelbench cluster YAML instead of ``cluster_conf.py`` (for an SSH user, key or containers), and
``--log-root`` wins over ``FLAGPERF_LOG_PATH``. The YAML test_conf still gives the deadline, monitor interval
and overrides; its ``cases`` and ``log_root`` are ``CASES`` and ``FLAGPERF_LOG_PATH`` here.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence

from run_benchmarks.catalog import casename, flagperf_conf
from run_benchmarks.catalog.config_files import CaseEntry, ClusterSpec
from run_benchmarks.catalog.vendors import accelerator_in_config_name
from run_benchmarks.cli.arguments import add_run_options
from run_benchmarks.cli.console import print_error
from run_benchmarks.cli.flagperf import check_hardware
from run_benchmarks.cli.flagperf_inputs import addresses_of, data_settings, host_specs
from run_benchmarks.cli.main import dispatch
from run_benchmarks.cli.parser import ArgumentParser
from run_benchmarks.errors import UserError
from run_benchmarks.plan import PlanInputs
from run_benchmarks.planner import checks as plan_checks


@dataclass
class ConfRun:
    """The files read, and what each key became (``notes``, printed with the plan)."""

    conf: flagperf_conf.FlagPerfConf
    notes: list[str] = field(default_factory=list)
    heading: str = "FlagPerf's config files, as this run takes them:"

    def prepare(self, args: argparse.Namespace, inputs: PlanInputs) -> PlanInputs:
        """The cases with their data, the hosts, and the vendor and variable checked against each case."""
        conf, where = self.conf, self.conf.where
        named = [self._hardware_field(casename.parse(case.text), case, inputs) for case in conf.cases]
        names = [name for name, _ in named]
        check_hardware(names, inputs, (conf.vendor, f"VENDOR = {conf.vendor!r} ({where.get('VENDOR')})"),
                       (conf.visible_env, f"ACCE_VISIBLE_DEVICE_ENV_NAME = {conf.visible_env!r} "
                                          f"({where.get('ACCE_VISIBLE_DEVICE_ENV_NAME')})"), self.notes)
        if args.cluster is None:
            inputs = self._cluster(inputs)
        else:
            self.notes.append(f"{conf.cluster_conf}: not read; the hosts are --cluster {args.cluster}'s")
        remote = any(h.backend != "local" for h in inputs.cluster.hosts)
        entries = []
        for case, (name, extern) in zip(conf.cases, named):
            said = f"CASES[{case.text!r}] ({case.where})"
            sets = {} if case.data is None else data_settings(inputs.catalog.resolve(name.case).task, name.case,
                                                               case.data, said, remote)
            entries.append(CaseEntry(case=str(name), extern_config=extern, set=sets))
            self.notes.append(f"{said}: " + (f"data.source {sets['data.source']}, data.path {sets['data.path']}"
                                             if sets else "the case's own data"))
        if conf.log_level is not None:
            self.notes.append(f"FLAGPERF_LOG_LEVEL = {conf.log_level!r}: accepted; accelbench has one output level")
        self.notes += conf.notes
        return replace(inputs, test_conf=inputs.test_conf.model_copy(update={"cases": entries}))

    def _hardware_field(self, name: casename.CaseName, case: flagperf_conf.ConfCase,
                        inputs: PlanInputs) -> tuple[casename.CaseName, Optional[str]]:
        """FlagPerf's newer case names put the extern config's name in the hardware field
        (``gpt3_6.7B:paddle_2.5.1:TP1PP1SH2SP8A10040G:1:8:1``): where no vendor declares that hardware and
        VENDOR ships ``config_<field>x<nnodes>x<nproc>`` for the case, that config runs on the accelerator its
        name ends in (A100_40G). Otherwise the name stays as written (and an unknown hardware is refused)."""
        spec = inputs.vendors.vendors.get(self.conf.vendor or "")
        if name.hardware in inputs.vendors.hardware or spec is None:
            return name, None
        stem = f"config_{name.hardware}x{name.nnodes}x{name.nprocs_per_node}"
        folder = inputs.vendors.folders[self.conf.vendor].path / name.case / name.framework
        accelerator = accelerator_in_config_name(stem, spec)
        if accelerator is None or not any((folder / f"{stem}{suffix}").is_file() for suffix in (".yaml", ".py")):
            return name, None
        self.notes.append(f"CASES[{case.text!r}] ({case.where}): the hardware field {name.hardware} names "
                          f"{self.conf.vendor}'s extern config {stem}, run on {accelerator}")
        return replace(name, hardware=accelerator), stem

    def _cluster(self, inputs: PlanInputs) -> PlanInputs:
        conf = self.conf
        said = f"HOSTS ({conf.where['HOSTS']})"
        addresses = addresses_of(conf.hosts, said)
        specs, notes = host_specs(addresses, [conf.ssh_port] * len(addresses), "HOSTS",
                                  "SSH_PORT" if "SSH_PORT" in conf.where else None)
        self.notes += notes
        if conf.master_port is not None:
            self.notes.append(f"MASTER_PORT {conf.master_port}: the rendezvous port of every round")
        cluster = ClusterSpec(hosts=specs, master_port=conf.master_port or "auto")
        return replace(inputs, cluster=cluster, cluster_path=conf.cluster_conf)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="run.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser)
    return parser


def main(argv: Optional[Sequence[str]], folder: Path) -> int:
    """``folder``: training/run_benchmarks/, which holds config/ and against which the files' paths resolve."""
    args = build_parser().parse_args(argv)
    args.command, args.case_names = "run", []
    try:
        conf = flagperf_conf.read(folder)
        args.flagperf = run = ConfRun(conf)
        if args.log_root is None and conf.log_path is not None:
            plan_checks.check_folder(conf.log_path, f"FLAGPERF_LOG_PATH ({conf.where['FLAGPERF_LOG_PATH']})",
                                     writable=not args.dry_run)
            args.log_root = conf.log_path
            run.notes.append(f"FLAGPERF_LOG_PATH ({conf.where['FLAGPERF_LOG_PATH']}): the log root, {conf.log_path}")
    except UserError as exc:
        return print_error(exc)
    return dispatch(args)

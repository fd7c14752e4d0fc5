"""The commands about the catalogue and the machines, not a run: ``list``, ``vendor new|check``, ``clean``."""
from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from run_benchmarks.catalog import casename, frameworks
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.planner.inputs import default_root, load_inputs
from run_benchmarks.plan import Paths
from run_benchmarks.catalog.vendors import VendorRegistry


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    root = (args.root or default_root()).resolve()
    paths = Paths(root)
    catalog = CaseCatalog(paths.cases_dir, paths.vendors_dir)
    vendors = VendorRegistry(paths.vendors_dir)
    cases = Table(title="cases")
    for col in ("case", "task", "frameworks", "description"):
        cases.add_column(col)
    for name in catalog.names():
        case = catalog.resolve(name)
        cases.add_row(name, case.task, ", ".join(case.frameworks), case.description)
    hardware = Table(title="hardware")
    for col in ("hardware", "vendor", "kind", "memory", "peak TFLOP/s (dense)"):
        hardware.add_column(col)
    for name, hw in sorted(vendors.hardware.items()):
        peaks = ", ".join(f"{k} {v:g}" for k, v in hw.spec.peak_tflops.items()) or "unknown (MFU n/a)"
        memory = f"{hw.spec.memory_gib:g} GiB" if hw.spec.memory_gib else "host memory"
        hardware.add_row(name, hw.vendor, hw.spec.kind, memory, peaks)
    vendor_table = Table(title="vendors")
    for col in ("vendor", "hardware", "description"):
        vendor_table.add_column(col)
    for name, spec in sorted(vendors.vendors.items()):
        vendor_table.add_row(name, ", ".join(spec.accelerators), spec.description)
    kinds = Table(title="accelerator kinds")
    for col in ("kind", "declared in", "torch / paddle device", "visible devices", "backends", "monitor"):
        kinds.add_column(col)
    for name, kind in vendors.kinds.items():
        source = vendors.kind_sources.get(name)
        kinds.add_row(name, str(source.parent.name) if source else "accelbench", f"{kind.torch_device} / {kind.paddle_device}",
                      kind.visible_devices_env or "-", ", ".join(f"{k} {v}" for k, v in kind.backends.items()) or "-",
                      kind.monitor if isinstance(kind.monitor, str) else f"command: {kind.monitor.command[0]}")
    console.print(cases)
    console.print(vendor_table)
    console.print(kinds)
    console.print(hardware)
    console.print(f"frameworks: {', '.join(frameworks.names())}")
    console.print(f"case names: {casename.FORMAT}, e.g. {casename.EXAMPLE}")
    return EXIT_OK


def cmd_vendor(args: argparse.Namespace, console: Console) -> int:
    from run_benchmarks.cli import vendor as vendor_tools, vendor_import  # planning every extern config: not for list

    root = (args.root or default_root()).resolve()
    vendors_dir = Paths(root).vendors_dir
    if args.vendor_command == "import-flagperf":
        return vendor_import.cmd_import_flagperf(args, console, root)
    if args.vendor_command == "new":
        target = vendor_tools.scaffold(vendors_dir, args.name)
        console.print(f"created {target} from vendors/{vendor_tools.TEMPLATE}; fill in the TODOs, then run: "
                      f"accelbench vendor check {args.name}", markup=False, soft_wrap=True)
        return EXIT_OK
    names = args.names or sorted(p.parent.name for p in vendors_dir.glob("*/vendor.yaml")
                                 if p.parent.name != vendor_tools.TEMPLATE)
    failed = False
    for name in names:
        findings = vendor_tools.check(root, name)
        errors = [f for f in findings if f.severity == "error"]
        failed |= bool(errors)
        verdict = "[green]ok[/]" if not errors else f"[red]{len(errors)} problem(s)[/]"
        warned = sum(f.severity == "warning" for f in findings)
        console.print(f"[bold]vendor {name}[/]: {verdict}" + (f", {warned} warning(s)" if warned else ""))
        by_file: dict = {}
        for f in findings:
            by_file.setdefault(f.path, []).append(f)
        for path, items in by_file.items():
            console.print(f"  {path}", markup=False, soft_wrap=True)
            for f in items:
                mark = {"error": "[red]error[/]", "info": "[cyan]ran[/]"}.get(f.severity, "[yellow]warning[/]")
                console.print(f"    {mark} {escape(f.problem)}", soft_wrap=True)
                if f.fix:
                    console.print(f"      fix: {escape(f.fix)}", soft_wrap=True)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_clean(args: argparse.Namespace, console: Console) -> int:
    from run_benchmarks.backends import cleanup
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.backends.fanout import fan_out

    inputs = load_inputs(args.root or default_root(), args.test_conf, args.cluster)
    specs = {spec.name: spec for spec in inputs.cluster.hosts}
    connected, errors = fan_out(connect, list(specs.values()))
    hosts = {name: host for name, host in zip(specs, connected) if host is not None}
    try:
        lines = [f"could not reach a host: {exc}" for exc in errors]
        lines += cleanup.clean(hosts, [name for name in hosts if specs[name].runtime == "container"],
                               args.docker_host)
    finally:
        for host in hosts.values():
            host.close()
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    if not lines:
        console.print("nothing left behind by a dead run", markup=False)
    return EXIT_FAILED if errors else EXIT_OK

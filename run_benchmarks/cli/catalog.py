"""The commands about the catalogue and the machines, not a run: ``list``, ``vendor new|check``, ``clean``.

``list`` must start fast (docs/benchmarks.md, "Start-up"): it imports no schema unless ``--check`` asks, and
the other commands import what they need inside their functions."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from run_benchmarks.catalog import casename, frameworks
from run_benchmarks.catalog.listing import read_listing
from run_benchmarks.catalog.root import default_root
from run_benchmarks.cli.console import make_console
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console


def _table(title: str, columns: tuple[str, ...], rows: list):
    """A rich table of plain text: the cells are the files' own words, never read as markup or emoji codes
    (which also spares rich's 50 ms emoji table)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title))
    for column in columns:
        table.add_column(Text(column))
    for row in rows:
        table.add_row(*map(Text, row))
    return table


def check_catalog(root: Path) -> int:
    """Every case (its ``extends`` chain, with its policy: cases/policy.yaml and its own policy.yaml) and
    vendor.yaml through its schema, as a run reads them: the first bad file raises a UserError naming it, the
    key and the fix. Returns the number of case and vendor files checked."""
    from run_benchmarks.catalog import policy  # the schemas: only for --check
    from run_benchmarks.catalog.cases import CaseCatalog
    from run_benchmarks.catalog.vendors import VendorRegistry

    catalog = CaseCatalog(root / "cases", root / "vendors")
    for name in catalog.names():
        catalog.resolve(name)
        policy.load(root / "cases", name)
    return len(catalog.names()) + len(VendorRegistry(root / "vendors").vendors)


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    """The catalogue's tables from the files' plain YAML (catalog/listing.py); ``--check`` validates first."""
    from rich.text import Text

    root = (args.root or default_root()).resolve()
    checked = check_catalog(root) if args.check else 0
    listing = read_listing(root / "cases", root / "vendors")
    console.print(_table("cases", ("case", "task", "frameworks", "description"), listing.cases))
    console.print(_table("vendors", ("vendor", "hardware", "description", "from"), listing.vendors))
    console.print(_table("accelerator kinds", ("kind", "declared in", "torch / paddle device", "visible devices",
                                               "backends", "monitor"), listing.kinds))
    console.print(_table("hardware", ("hardware", "vendor", "kind", "memory", "peak TFLOP/s (dense)"),
                         listing.hardware))
    lines = [f"frameworks: {', '.join(frameworks.names())}", f"case names: {casename.FORMAT}, e.g. {casename.EXAMPLE}"]
    lines += [f"problem: {problem}" for problem in listing.problems]
    if checked:
        lines.append(f"checked {checked} case and vendor files against their schemas: ok")
    elif listing.problems:
        lines.append("run `accelbench list --check` for each file's errors, keys and fixes")
    for line in lines:
        console.print(Text(line, style="yellow" if line.startswith("problem") else ""), soft_wrap=True)
    return EXIT_USAGE if listing.problems else EXIT_OK  # a malformed file is the user's to fix, as with --check


def cmd_vendor(args: argparse.Namespace, console: Console) -> int:
    from rich.markup import escape

    from run_benchmarks.catalog.vendor_folders import vendor_folders
    from run_benchmarks.cli import vendor as vendor_tools, vendor_import  # planning every extern config: not for list
    from run_benchmarks.plan import Paths

    root = (args.root or default_root()).resolve()
    vendors_dir = Paths(root).vendors_dir
    if args.vendor_command == "import-flagperf":
        return vendor_import.cmd_import_flagperf(args, console, root)
    if args.vendor_command == "new":
        target = vendor_tools.scaffold(vendors_dir, args.name)
        console.print(f"created {target} from vendors/{vendor_tools.TEMPLATE}; fill in the TODOs, then run: "
                      f"accelbench vendor check {args.name}", markup=False, soft_wrap=True)
        return EXIT_OK
    names = args.names or list(vendor_folders(vendors_dir))  # the checkout's and installed packages
    failed = False
    for name in names:
        findings = vendor_tools.check(root, name, run_tools=args.run_tools)
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
                mark = {"error": "[red]error[/]", "info": "[cyan]tool[/]"}.get(f.severity, "[yellow]warning[/]")
                console.print(f"    {mark} {escape(f.problem)}", soft_wrap=True)
                if f.fix:
                    console.print(f"      fix: {escape(f.fix)}", soft_wrap=True)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_clean(args: argparse.Namespace, console: Console) -> int:
    from run_benchmarks.backends import cleanup
    from run_benchmarks.backends.hosts import connect
    from run_benchmarks.backends.fanout import fan_out
    from run_benchmarks.planner.inputs import load_inputs

    inputs = load_inputs(args.root or default_root(), args.test_conf, args.cluster)
    specs = {spec.name: spec for spec in inputs.cluster.hosts}
    connected, errors = fan_out(connect, list(specs.values()))
    hosts = {name: host for name, host in zip(specs, connected) if host is not None}
    try:
        lines = [f"could not reach a host: {exc}" for exc in errors]
        unreached: list[str] = []
        lines += cleanup.clean(hosts, [name for name in hosts if specs[name].runtime == "container"],
                               args.docker_host, unreached)
    finally:
        for host in hosts.values():
            host.close()
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    if not lines:
        console.print("nothing left behind by a dead run", markup=False)
    if unreached:  # what was asked for may still be there: not a clean exit
        make_console(stderr=True).print(f"accelbench: error: could not clean {', '.join(unreached)}: its Docker "
                                        "engine did not answer", markup=False, soft_wrap=True)
    return EXIT_FAILED if errors or unreached else EXIT_OK

"""The ``accelbench`` command (and ``start_task.py``, its FlagPerf-compatible twin): parse, then run one command.

The parser (``arguments.py``) is built from the standard library alone; ``COMMANDS`` registers each command's
function by path (the one registry style), and ``dispatch`` imports only the module of the command given, so
``--help`` and ``list`` never load what ``run``, ``report`` or ``calibrate`` need (tests/test_cli_imports.py).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional, Sequence

from run_benchmarks import signals
from run_benchmarks.cli.arguments import add_run_options, build_parser
from run_benchmarks.cli.console import make_console, print_error
from run_benchmarks.errors import UserError
from run_benchmarks.registry import Registry

__all__ = ["COMMANDS", "add_run_options", "build_parser", "command", "dispatch", "main", "print_error"]

# Every command by path ("module:function"), the function taking (args, console) and returning the exit status:
# only the module of the command given is imported.
COMMANDS: Registry[Callable[[argparse.Namespace, object], int]] = Registry("command")
COMMANDS.register("run", "run_benchmarks.cli.run:cmd_run")
COMMANDS.register("sweep", "run_benchmarks.cli.sweep:cmd_sweep")
COMMANDS.register("list", "run_benchmarks.cli.catalog:cmd_list")
COMMANDS.register("vendor", "run_benchmarks.cli.catalog:cmd_vendor")
COMMANDS.register("clean", "run_benchmarks.cli.catalog:cmd_clean")
COMMANDS.register("calibrate", "run_benchmarks.cli.calibrate:cmd_calibrate")
COMMANDS.register("runs", "run_benchmarks.cli.results:cmd_runs")
COMMANDS.register("show", "run_benchmarks.cli.results:cmd_show")
COMMANDS.register("store", "run_benchmarks.cli.store:cmd_store")
COMMANDS.register("report", "run_benchmarks.cli.report:cmd_report")
COMMANDS.register("reference", "run_benchmarks.cli.reference:cmd_reference")
COMMANDS.register("compare", "run_benchmarks.cli.report:cmd_compare")
COMMANDS.register("history", "run_benchmarks.cli.history:cmd_history")
COMMANDS.register("table", "run_benchmarks.cli.table:cmd_table")
COMMANDS.register("import", "run_benchmarks.cli.imports:cmd_import")
COMMANDS.register("bundle", "run_benchmarks.cli.bundle:cmd_bundle")
COMMANDS.register("certify", "run_benchmarks.cli.certify:cmd_certify")
COMMANDS.register("verify", "run_benchmarks.cli.certify:cmd_verify")


def command(name: str) -> Callable[[argparse.Namespace, object], int]:
    """The function of command ``name``, its module imported now."""
    return COMMANDS.get(name)


def dispatch(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        with signals.restored():  # run and sweep install their handlers; the caller's are back when they end
            if args.command in ("run", "sweep"):
                from run_benchmarks.cli.run import check_run_args

                check_run_args(args)
            return command(args.command)(args, console)
    except UserError as exc:
        return print_error(exc)


def main(argv: Optional[Sequence[str]] = None) -> int:
    code = dispatch(build_parser().parse_args(argv))
    if signals.received() is not None:
        # Stopped by a signal and everything is recorded. Python's finalization puts the default handlers
        # back, so one more TERM or HUP arriving during it would end the process as killed (-15) instead of
        # with this exit code (seen on a loaded machine after a triple Ctrl-C, Ctrl-C, TERM): leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


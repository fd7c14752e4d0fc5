"""The ``accelbench`` command (and ``start_task.py``, its FlagPerf-compatible twin): parse, then run one command.

The parser (``arguments.py``) is built from the standard library alone; ``COMMANDS`` names each command's
function by module and name, and ``dispatch`` imports only the module of the command given, so ``--help`` and
``list`` never load what ``run``, ``report`` or ``calibrate`` need (tests/test_cli_imports.py).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable, Optional, Sequence

from run_benchmarks import signals
from run_benchmarks.cli.arguments import add_run_options, build_parser
from run_benchmarks.cli.console import make_console, print_error
from run_benchmarks.errors import UserError

__all__ = ["COMMANDS", "add_run_options", "build_parser", "command", "dispatch", "main", "print_error"]

# Every command: "module:function", the function taking (args, console) and returning the exit status.
COMMANDS = {
    "run": "run_benchmarks.cli.run:cmd_run",
    "sweep": "run_benchmarks.cli.sweep:cmd_sweep",
    "list": "run_benchmarks.cli.catalog:cmd_list",
    "vendor": "run_benchmarks.cli.catalog:cmd_vendor",
    "clean": "run_benchmarks.cli.catalog:cmd_clean",
    "calibrate": "run_benchmarks.cli.calibrate:cmd_calibrate",
    "runs": "run_benchmarks.cli.results:cmd_runs",
    "show": "run_benchmarks.cli.results:cmd_show",
    "store": "run_benchmarks.cli.store:cmd_store",
    "report": "run_benchmarks.cli.report:cmd_report",
    "reference": "run_benchmarks.cli.reference:cmd_reference",
    "compare": "run_benchmarks.cli.report:cmd_compare",
    "history": "run_benchmarks.cli.history:cmd_history",
    "table": "run_benchmarks.cli.table:cmd_table",
    "import": "run_benchmarks.cli.imports:cmd_import",
    "bundle": "run_benchmarks.cli.bundle:cmd_bundle",
    "certify": "run_benchmarks.cli.certify:cmd_certify",
    "verify": "run_benchmarks.cli.certify:cmd_verify",
}


def command(name: str) -> Callable[[argparse.Namespace, object], int]:
    """The function of command ``name``, its module imported now."""
    module, function = COMMANDS[name].split(":")
    return getattr(importlib.import_module(module), function)


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


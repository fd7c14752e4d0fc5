#!/usr/bin/env python3
"""FlagPerf-compatible entry: ``python start_task.py --case_name gpt2_tiny:torch_2.13:cpu:1:2``.

The same as ``accelbench run CASE_NAME``; every ``accelbench run`` option works here, and so do FlagPerf's own
(``--vendor``, ``--nnodes``, ``--hosts``, ``--data_dir``, ...: README, "FlagPerf's options"). FlagPerf's own
paths, ``training/run_benchmarks/paddle/start_paddle_task.py`` and ``pytorch/start_pytorch_task.py``, call
``main`` with their framework.
"""
import argparse
import sys
from typing import Optional, Sequence

from run_benchmarks.catalog import casename
from run_benchmarks.cli import flagperf
from run_benchmarks.cli.main import add_run_options, dispatch, print_error
from run_benchmarks.cli.parser import ArgumentParser
from run_benchmarks.errors import UserError


def main(argv: Optional[Sequence[str]] = None, framework: Optional[str] = None) -> int:
    """``framework``: FlagPerf's per-framework script calling (``paddle``, ``torch``); its cases only."""
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog=f"case names: {casename.FORMAT}")
    parser.add_argument("--case_name", "--case-name", dest="case_names", action="append", default=[],
                        metavar="CASE_NAME", help="case to run (repeatable, or comma-separated); "
                                                  "default: the cases in configs/test_conf.yaml")
    add_run_options(parser)
    flagperf.add_options(parser)
    args = parser.parse_args(argv)
    args.command = "run"
    try:
        if framework is not None:
            flagperf.check_script(args.case_names, framework)
        args.flagperf = flagperf.parse(args)  # FlagPerf's options: checked, mapped, the rest at plan time
    except UserError as exc:
        return print_error(exc)
    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())

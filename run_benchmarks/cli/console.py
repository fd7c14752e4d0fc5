"""Where the commands print: rich consoles, and a UserError's one line (exit 2). rich is imported when a command
prints, not when the parser is built."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from run_benchmarks.cli.exit_codes import EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console

    from run_benchmarks.errors import UserError


def make_console(stderr: bool = False) -> Console:
    from rich.console import Console

    # Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
    width = None if (sys.stderr if stderr else sys.stdout).isatty() else 160
    return Console(stderr=stderr, highlight=False, width=width)


def print_error(exc: UserError) -> int:
    from rich.text import Text

    # The message holds user text (case names, paths, YAML): printed as it is, never read as markup.
    make_console(stderr=True).print(Text.assemble(("accelbench: error: ", "bold red"), str(exc)), soft_wrap=True)
    return EXIT_USAGE

"""The argument parser every entry uses (``accelbench``, ``start_task.py`` and FlagPerf's scripts): argparse, but
an option it does not know is refused with the nearest one it does, not with argparse's bare "unrecognized
arguments". Options people bring from elsewhere get their own word (``HINTS``): FlagPerf's start_task takes
``--nproc``, and ``--nproc_per_node`` (torchrun's and paddle.distributed.launch's) is refused naming it rather
than taken as an alias, so a command that works here works in FlagPerf too. Standard library only: building
the parser stays fast (tests/test_cli_imports.py)."""
from __future__ import annotations

import argparse
import difflib
import sys
from typing import Optional

# Keyed as _plain spells them (- and _ alike).
HINTS = {
    "__nproc_per_node": "FlagPerf's option is --nproc (the case name's nprocs_per_node field says it too); "
                        "--nproc_per_node is the launchers' own, which accelbench passes to them itself",
}


def _plain(word: str) -> str:
    return word.replace("-", "_")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, refusing an unknown option with the nearest known one (exit 2, no usage dump)."""

    def parse_args(self, args=None, namespace=None):  # noqa: D401 - argparse's signature
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            message, fix = unknown_words(self, parsed, extras)
            from run_benchmarks.cli.console import print_error  # rich: only on this error path
            from run_benchmarks.errors import UserError

            sys.exit(print_error(UserError(message, fix)))
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The parser and the subcommand parsers the arguments went through (``vendor check``: three)."""
    chain = [parser]
    while True:
        actions = [a for a in chain[-1]._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions:
            return chain
        picked = getattr(parsed, actions[0].dest or "", None)
        if picked not in actions[0].choices:
            return chain
        chain.append(actions[0].choices[picked])


def option_strings(parsers: list[argparse.ArgumentParser]) -> list[str]:
    return sorted({o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--")})


def nearest(word: str, known: list[str]) -> Optional[str]:
    """The known option closest to ``word``, with - and _ read alike (``--log-dir`` finds ``--log_dir``)."""
    plain = {_plain(o): o for o in known}
    close = difflib.get_close_matches(_plain(word), list(plain), n=1, cutoff=0.6)
    return plain[close[0]] if close else None


def unknown_words(parser: argparse.ArgumentParser, parsed: argparse.Namespace, extras: list[str]) -> tuple[str, str]:
    """The message and fix for the first word argparse did not take."""
    chain = _chosen(parser, parsed)
    prog = chain[-1].prog
    first = extras[0]
    if not first.startswith("-"):
        return (f"unrecognized argument {first!r}", f"see `{prog} --help` for what {prog} takes")
    word = first.split("=", 1)[0]
    if _plain(word) in HINTS:
        return f"unrecognized option {word}", HINTS[_plain(word)]
    close = nearest(word, option_strings(chain))
    if close is None:
        return f"unrecognized option {word}", f"see `{prog} --help` for the options {prog} takes"
    return f"unrecognized option {word}", f"did you mean {close}? (`{prog} --help` lists every option)"

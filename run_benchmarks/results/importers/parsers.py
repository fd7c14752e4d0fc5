"""The log parsers, in the one registry style (run_benchmarks/registry.py): each built-in by path, its module
imported on its first lookup, never with the package; a plugin (or a test) registers its own with
``@register``. Apart from the package's types (``__init__``), which the parser modules import."""
from __future__ import annotations

from typing import Any, Callable, Optional

from run_benchmarks.errors import UserError
from run_benchmarks.registry import Registry
from run_benchmarks.results.importers import Imported, Parser, max_line_bytes, parser

# The built-in parsers, by path: a parser's module is imported on its first lookup, never with the package.
PARSERS: Registry[Parser] = Registry("log parser")
PARSERS.register("megatron/1", "run_benchmarks.results.importers.megatron:MEGATRON_PARSER")
PARSERS.register("megatron-deepspeed/1", "run_benchmarks.results.importers.megatron:DEEPSPEED_PARSER")
PARSERS.register("mllog/1", "run_benchmarks.results.importers.mllog:PARSER")
PARSERS.register("nemo/1", "run_benchmarks.results.importers.nemo:PARSER")
PARSERS.register("paddlenlp/1", "run_benchmarks.results.importers.paddlenlp:PADDLENLP_PARSER")
PARSERS.register("paddleformers/1", "run_benchmarks.results.importers.paddlenlp:PADDLEFORMERS_PARSER")
PARSERS.register("erniekit/1", "run_benchmarks.results.importers.paddlenlp:ERNIEKIT_PARSER")
PARSERS.register("torchtitan/1", "run_benchmarks.results.importers.torchtitan:PARSER")


def register(format: str, version: int, description: str, folder: Optional[Any] = None):
    """``@register(...)`` on a ``parse`` function: a parser of a plugin (or a test), registered as it is."""
    def wrap(fn: Callable[..., Imported]) -> Callable[..., Imported]:
        made = parser(format, version, description, folder)(fn)
        PARSERS.register(made.name, made)
        return fn
    return wrap


def get(name: str) -> Parser:
    max_line_bytes()  # a bad $ACCELBENCH_MAX_LOG_LINE_BYTES is refused before anything is stored
    if name in PARSERS:
        return PARSERS.get(name)
    versions = [p for _, p in PARSERS.items() if p.format == name]
    if versions:
        return max(versions, key=lambda p: p.version)
    raise UserError(f"no log parser {name!r}",
                    f"use one of: {', '.join(sorted(PARSERS))} (or the format alone for its newest version)")

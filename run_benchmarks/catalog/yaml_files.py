"""Reading config files as plain YAML data: the size cap, libyaml's parser, no anchors, aliases or key twice.

Apart from the schemas (config.py) so that ``accelbench list``, which reads the few fields it shows from a
hundred files, loads no pydantic model (docs/benchmarks.md, "Start-up"); every error names the file with
its line and column.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from run_benchmarks import limits
from run_benchmarks.errors import UserError

MAX_YAML_DEPTH = 32  # configs nest four or five levels; far deeper is a mistake or an attack on the loader


class YamlRefused(Exception):
    """A YAML construct accelbench does not accept in user files, with where it is."""

    def __init__(self, problem: str, mark, fix: str):
        super().__init__(problem)
        self.problem, self.mark, self.fix = problem, mark, fix


class _PlainLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """``SafeLoader`` (libyaml's parser where PyYAML has it: ~8x faster, which ``accelbench list``'s hundred
    files feel) that refuses a key given twice. Anchors, aliases and depth are refused before it composes a
    node (``_refuse_references``)."""

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused where it appears: YAML keeps the last silently, and the first
        (the one a reader sees) would not be what runs."""
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first is not key_node:
                raise YamlRefused(f"key {key!r} is given twice (first on line {first.start_mark.line + 1})",
                                  key_node.start_mark, "keep one of them")
        return super().construct_mapping(node, deep)


def _refuse_references(text: str) -> None:
    """No anchors or aliases, and a bounded depth, read from the parser's events before any node is built.

    An alias is a reference, not a copy: a few lines of nested aliases ("billion laughs") expand to
    billions of leaves when the layers are merged, and an alias inside its own anchor is a cycle. Configs
    never need them, so they are refused where they appear rather than bounded after expansion.
    """
    depth = 0  # collections open around the next node
    for event in yaml.parse(text, Loader=_PlainLoader):
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.NodeEvent):  # a scalar, an alias, or a mapping or sequence opening
            if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
                sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
                raise YamlRefused(f"YAML anchor/alias '{sign}{event.anchor}' is not accepted in accelbench "
                                  "configs (a few nested aliases expand to billions of values)",
                                  event.start_mark, "write the values out in full instead of '&name' and '*name'")
            if depth + 1 > MAX_YAML_DEPTH:
                raise YamlRefused(f"YAML nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark,
                                  "flatten the value; configs nest a few levels at most")
            depth += isinstance(event, yaml.CollectionStartEvent)


def parse_yaml(text: str, source: str):
    """``text`` as plain YAML data (no anchors, aliases or tags beyond the safe ones, no key twice);
    errors name ``source`` with the line and column."""
    limits.CONFIG_BYTES.check(len(text), source)
    try:
        _refuse_references(text)
        return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader subclass
    except YamlRefused as exc:
        where = f"{source}:{exc.mark.line + 1}:{exc.mark.column + 1}" if exc.mark else source
        raise UserError(f"{where}: {exc.problem}", exc.fix) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"{where}: YAML syntax error: {problem}",
                        "check indentation, colons and quotes on that line") from None
    except RecursionError:
        raise UserError(f"{source}: YAML nested too deeply", "flatten the value; configs nest a few "
                        "levels at most") from None
    except ValueError as exc:  # a whole number past Python's int-string limit (4,300 digits)
        raise UserError(f"{source}: a number no setting can take ({str(exc).split(':')[0]})",
                        "write the value as a number of a few digits") from None


_NOT_A_FILE = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a device"),
               (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def read_config_text(path: Path, kind: str = "") -> str:
    """A config file's text (YAML, or FlagPerf's Python), its size checked against the cap before a byte is
    parsed (PyYAML takes ~170x a file's size in memory); ``kind`` names the format in the fixes. Only a
    regular file is read: a FIFO would block for ever and a device (/dev/zero) never ends, so the file is
    opened without blocking and what it is checked before a byte is read."""
    what = f"{kind} " if kind else ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind_of = next((name for test, name in _NOT_A_FILE if test(mode)), "not a regular file")
            raise UserError(f"{path}: is {kind_of}, not a config file; nothing was read from it",
                            f"give the path of a regular {what}file")
        with open(fd, "rb") as f:
            raw = f.read(limits.CONFIG_BYTES.value() + 1)
            limits.CONFIG_BYTES.check(max(len(raw), os.fstat(f.fileno()).st_size), str(path))
        return raw.decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found", "check the path (a relative one is read from the current "
                        "directory)") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})", f"save the file as UTF-8 {what}".strip()) \
            from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}",
                        f"give the path of a readable {what}file") from None


def load_yaml(path: Path) -> dict:
    """A YAML mapping from ``path``; syntax errors name the line and column."""
    text = read_config_text(path, "YAML")
    data = parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data

"""YAML loading, schema validation and layering of configs.

Every file is validated on load against a typed schema; an error names the
file, the dotted key and how to fix it. Workload settings are layered
case < vendor extern config < test_conf overrides < command line, and each
leaf remembers which layer set it, so a bad value is blamed on the file that
holds it rather than on the merged result.
"""
from __future__ import annotations

import copy
import os
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Type, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from run_benchmarks import limits
from run_benchmarks.errors import UserError

M = TypeVar("M", bound=BaseModel)
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")  # a folder under cases/; never a path
Key = tuple[str, ...]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# ---------------------------------------------------------------- loading

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


def read_config_text(path: Path, kind: str = "") -> str:
    """A config file's text (YAML, or FlagPerf's Python), its size checked against the cap before a byte is
    parsed (PyYAML takes ~170x a file's size in memory); ``kind`` names the format in the fixes."""
    what = f"{kind} " if kind else ""
    try:
        with open(path, "rb") as f:
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


def load_model(cls: Type[M], path: Path, data: Optional[dict] = None) -> M:
    """Validate a whole file against ``cls``."""
    data = load_yaml(path) if data is None else data
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise describe(exc, cls, default_source=str(path)) from None


# ---------------------------------------------------------------- layering


@dataclass(frozen=True)
class Layer:
    source: str  # a file path, or a description such as "--set"
    data: dict


@dataclass
class Layered:
    data: dict = field(default_factory=dict)
    provenance: dict[Key, str] = field(default_factory=dict)

    def source_of(self, key: Key, default: str) -> str:
        for end in range(len(key), 0, -1):
            if key[:end] in self.provenance:
                return self.provenance[key[:end]]
        return default


def merge(layers: list[Layer]) -> Layered:
    out = Layered()
    for layer in layers:
        _merge_into(out, out.data, layer.data, (), layer.source)
    return out


def _merge_into(out: Layered, dst: dict, src: dict, prefix: Key, source: str) -> None:
    for key, value in src.items():
        path = prefix + (str(key),)
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge_into(out, dst[key], value, path, source)
            continue
        dst[key] = copy.deepcopy(value)
        _mark(out, path, value, source)


def _mark(out: Layered, path: Key, value: Any, source: str) -> None:
    out.provenance[path] = source
    if isinstance(value, dict):
        for key, sub in value.items():
            _mark(out, path + (str(key),), sub, source)


def validate_layered(cls: Type[M], layered: Layered, default_source: str) -> M:
    try:
        return cls.model_validate(layered.data)
    except ValidationError as exc:
        raise describe(exc, cls, default_source, layered) from None


def parse_assignment(text: str) -> dict:
    """``train.steps=10`` -> ``{"train": {"steps": 10}}``; the value is read as YAML."""
    if "=" not in text:
        raise UserError(f"--set {text!r}: expected KEY=VALUE", "e.g. --set train.steps=10")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise UserError(f"--set {text!r}: key {key!r} is empty or has an empty part",
                        "e.g. --set train.micro_batch_size=8")
    try:
        value = parse_yaml(raw, f"--set {text!r}") if raw.strip() else ""
    except UserError as exc:
        if "YAML syntax error" not in exc.message:
            raise
        value = raw  # not YAML: the plain string, which the schema then judges
    nested: Any = value
    for part in reversed(parts):
        nested = {part: nested}
    return nested


# ---------------------------------------------------------------- error messages


def describe(exc: ValidationError, cls: Type[BaseModel], default_source: str,
             layered: Optional[Layered] = None) -> UserError:
    lines, fixes = [], []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        key = ".".join(loc) or "(top level)"
        source = layered.source_of(loc, default_source) if layered else default_source
        kind = err["type"]
        if kind == "extra_forbidden":
            known = _known_keys(cls, loc[:-1])
            lines.append(f"{source}: unknown key {key!r}")
            close = difflib.get_close_matches(loc[-1], known, n=1)
            if close:
                fixes.append(f"did you mean {'.'.join(loc[:-1] + (close[0],))!r}?")
            elif known:
                fixes.append(f"keys allowed there: {', '.join(sorted(known))}")
        elif kind == "missing":
            lines.append(f"{source}: missing required key {key!r}")
            fixes.append(f"add {key!r} to {source}")
        else:
            message = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {_short(got)})"
            lines.append(f"{source}: {key}: {message}{shown}")
            limit = (err.get("ctx") or {}).get("le")
            if kind == "less_than_equal" and limit is not None:
                why = _limit_reason(cls, loc)
                fixes.append(f"set {key} to at most {limit} in {source}" + (f" ({why})" if why else ""))
    fix = "; ".join(dict.fromkeys(fixes)) or None
    return UserError("\n".join(lines), fix)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _limit_reason(cls: Type[BaseModel], loc: Key) -> Optional[str]:
    """Why a field has its maximum: ``json_schema_extra={"max_reason": ...}`` on the field."""
    model: Any = cls
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        info = fields[part]
        model = _model_of(info.annotation)
    extra = getattr(info, "json_schema_extra", None)
    return extra.get("max_reason") if isinstance(extra, dict) else None


def _known_keys(cls: Type[BaseModel], loc: Key) -> list[str]:
    model: Any = cls
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return []
        model = _model_of(fields[part].annotation)
    fields = getattr(model, "model_fields", None)
    return list(fields) if fields else []


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None

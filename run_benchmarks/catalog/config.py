"""YAML loading, schema validation and layering of configs.

Every file is validated on load against a typed schema; an error names the
file, the dotted key and how to fix it. Workload settings are layered
case < vendor extern config < test_conf overrides < command line, and each
leaf remembers which layer set it, so a bad value is blamed on the file that
holds it rather than on the merged result.
"""
from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Type, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from run_benchmarks.catalog.yaml_files import (  # noqa: F401 - re-exported: callers load files from here
    MAX_YAML_DEPTH, load_yaml, parse_yaml, read_config_text)
from run_benchmarks.errors import UserError

M = TypeVar("M", bound=BaseModel)
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")  # a folder under cases/; never a path
Key = tuple[str, ...]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# YAML loading: yaml_files.py (no pydantic there, for `accelbench list`)


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
        model = cls.model_validate(layered.data)
    except ValidationError as exc:
        raise describe(exc, cls, default_source, layered) from None
    _refuse_booleans_as_numbers(model, layered.data, (), layered, default_source)
    return model


def _refuse_booleans_as_numbers(model: Any, data: Any, key: Key, layered: Layered, default_source: str) -> None:
    """A boolean where a number goes (``--set model.seq_len=true``): pydantic reads it as 1 or 0, which no
    one meant; refused naming where it was set. Walks the layered data beside the validated model."""
    if not isinstance(data, dict):
        return
    for name, value in data.items():
        field = getattr(model, str(name), None) if isinstance(model, BaseModel) else \
            model.get(name) if isinstance(model, dict) else None
        path = key + (str(name),)
        if isinstance(value, dict):
            _refuse_booleans_as_numbers(field, value, path, layered, default_source)
        elif isinstance(value, bool) and type(field) in (int, float):
            dotted = ".".join(path)
            raise UserError(f"{layered.source_of(path, default_source)}: {dotted}: {str(value).lower()} is a "
                            "boolean, not a number", f"give {dotted} a number (YAML reads true/false, yes/no "
                            "and on/off as booleans)")


def set_source(text: str) -> str:
    """How messages name a ``--set`` (its text clipped: a value may be thousands of characters)."""
    return f"--set {text}" if len(text) <= 200 else f"--set {text[:100]}... ({len(text):,} characters)"


def parse_assignment(text: str) -> dict:
    """``train.steps=10`` -> ``{"train": {"steps": 10}}``; the value is read as YAML."""
    source = set_source(text)
    if "=" not in text:
        raise UserError(f"{source}: expected KEY=VALUE", "e.g. --set train.steps=10")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise UserError(f"{source}: key {key[:100]!r} is empty or has an empty part",
                        "e.g. --set train.micro_batch_size=8")
    try:
        value = parse_yaml(raw, source) if raw.strip() else ""
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
        if not loc and layered:  # a check across keys: name where each key its message names was set
            named = {k: layered.provenance[tuple(k.split("."))] for k in re.findall(r"\b[a-z_]+(?:\.[a-z0-9_]+)+\b",
                                                                                 err["msg"])
                     if tuple(k.split(".")) in layered.provenance}
            if named:
                source, key = ", ".join(f"{k} set in {where}" for k, where in named.items()), ""
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
            lines.append(f"{source}: {key + ': ' if key else ''}{message}{shown}")
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

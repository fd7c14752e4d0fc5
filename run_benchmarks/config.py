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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Type, TypeVar, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, ValidationError, conint, field_validator,
                      model_validator)

from .errors import UserError

M = TypeVar("M", bound=BaseModel)
Key = tuple[str, ...]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- loading


def load_yaml(path: Path) -> dict:
    """A YAML mapping from ``path``; syntax errors name the line and column."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found", "check the path (a relative one is read from the current "
                        "directory)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"{where}: YAML syntax error: {problem}",
                        "check indentation, colons and quotes on that line") from None
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
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
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
            shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
            lines.append(f"{source}: {key}: {message}{shown}")
    fix = "; ".join(dict.fromkeys(fixes)) or None
    return UserError("\n".join(lines), fix)


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


# ---------------------------------------------------------------- file schemas


class TestConf(Strict):
    """``configs/test_conf.yaml``: what a run does when the command line does not say."""

    __test__ = False  # not a pytest test class, despite the name

    cases: list[str] = Field(default_factory=list, description="case names run when none is given")
    log_root: str = "logs"
    timeout_s: PositiveFloat = Field(3600, description="deadline for one round of one case")
    monitor_interval_s: NonNegativeFloat = Field(1.0, description="seconds between host and accelerator "
                                                                  "samples beside every node; 0 turns monitors off")
    overrides: dict[str, Any] = Field(default_factory=dict, description="workload keys applied to every case")

    def log_root_in(self, root: Path) -> Path:
        """``log_root``, relative to the checkout ``root`` unless absolute."""
        path = Path(self.log_root)
        return path if path.is_absolute() else root / path


class HostSpec(Strict):
    """One machine. ``local``: this one, with plain processes. ``ssh``: reached over SSH (paramiko), host
    key checked against ``known_hosts`` and never added, key authentication only."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    backend: Literal["local", "ssh"] = "local"
    address: str = "127.0.0.1"
    python: Optional[str] = Field(None, description="interpreter that runs the launcher; default: accelbench's own")
    port: conint(ge=1, le=65535) = Field(22, description="ssh: the SSH port")
    user: Optional[str] = Field(None, description="ssh: login user; default: the local user")
    identity_file: Optional[str] = Field(None, description="ssh: private key; default: the SSH agent and ~/.ssh keys")
    known_hosts: str = Field("~/.ssh/known_hosts", description="ssh: the host keys to trust; a host not in it "
                                                               "is refused")
    connect_timeout_s: PositiveFloat = Field(10, description="ssh: give up connecting after this long")
    work_root: str = Field("/tmp/accelbench", description="ssh: where code, configs and logs go on the host")
    data_root: Optional[str] = Field(None, description="ssh: the host's data folder, mounted read-only in the "
                                                       "container at the same path")
    docker_host: str = Field("unix:///var/run/docker.sock", description="the host's Docker engine socket")
    runtime: Literal["process", "container"] = Field(
        "process", description="container: each node runs in the vendor's image for the framework")
    devices: Optional[list[conint(ge=0)]] = Field(None, description=(
        "accelerator indices a node on this host may use, exported through the vendor's visible_devices_env "
        "(CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ...); default: all of them"))


class ClusterSpec(Strict):
    """``configs/cluster.yaml``: the hosts a case's nodes are placed on, in order."""

    hosts: list[HostSpec] = Field(min_length=1)
    master_port: Union[Literal["auto"], conint(ge=1, le=65535)] = "auto"

    @field_validator("hosts")
    @classmethod
    def _unique_names(cls, hosts: list[HostSpec]) -> list[HostSpec]:
        names = [h.name for h in hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        return hosts


class CaseFile(Strict):
    """``cases/<case>/case.yaml``: the workload and its default hyper-parameters.

    ``extends: <case>`` makes a variant (e.g. a LoRA finetune of a model): the base
    case's keys apply first and this file's keys on top, so the model is written once.
    """

    description: str = ""
    extends: Optional[str] = None
    task: Optional[Literal["pretrain", "finetune", "lora"]] = Field(None, description="default: pretrain")
    frameworks: Optional[list[str]] = Field(None, min_length=1)
    model: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _complete_unless_extending(self) -> "CaseFile":
        if self.extends is None:
            missing = [key for key in ("frameworks", "model", "train") if not getattr(self, key)]
            if missing:
                raise ValueError(f"a case needs {', '.join(missing)} (or 'extends: <case>' to take them from "
                                 "another case)")
        return self

    def workload_layer(self) -> dict:
        layer = {"model": self.model, "train": self.train, "data": self.data, "parallel": self.parallel}
        return {**layer, "task": self.task} if self.task else layer


# What a vendor may not change (docs/vendor-onboarding.md, "Fair comparison"): the measured steps, the
# optimizer, the starting point and the adapters the task defines belong to the case.
CASE_OWNED_TRAIN_KEYS = {"steps": "the step count", "warmup_steps": "the warm-up steps", "lr": "the optimizer",
                         "weight_decay": "the optimizer", "seed": "the initialisation",
                         "init_weights": "the initial weights", "lora_rank": "the task's adapters",
                         "lora_alpha": "the task's adapters", "lora_targets": "the task's adapters"}


class ExternConfig(Strict):
    """``vendors/<vendor>/<case>/<framework>/config_<name>.yaml``: a vendor's tuning.

    A vendor may tune the batch, precision and parallel layout; the model and the
    data belong to the case, so a comparison across vendors stays fair.
    """

    description: str = ""
    train: dict[str, Any] = Field(default_factory=dict)
    parallel: dict[str, Any] = Field(default_factory=dict)

    @field_validator("train")
    @classmethod
    def _no_case_owned_keys(cls, train: dict) -> dict:
        for key, what in CASE_OWNED_TRAIN_KEYS.items():
            if key in train:
                raise ValueError(f"a vendor config may not change {what} (fair comparison); remove '{key}'")
        return train

    def workload_layer(self) -> dict:
        return {"train": self.train, "parallel": self.parallel}

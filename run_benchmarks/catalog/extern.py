"""A vendor's extern config, in either format: which file a name means, and the workload layers it gives.

``--extern_config_file NAME`` is a path to an existing ``.yaml``/``.yml``/``.py`` file, or a config name looked
up in ``vendors/<vendor>/<case>/<framework>/``, with or without its suffix: accelbench's ``NAME.yaml`` or
FlagPerf's ``NAME.py``. Where the folder holds both, the YAML is read (accelbench's own format, the one
``vendor check`` and ``vendor import-flagperf`` write) and the plan says so. A FlagPerf ``.py`` is read without
running it (flagperf_config) and its keys translated (flagperf_keys): one layer per key, so an error names
the line that set the value; keys the case owns are reported against the run's own values, never applied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from run_benchmarks.catalog import flagperf_config, flagperf_keys
from run_benchmarks.catalog.config import load_model
from run_benchmarks.catalog.config_files import ExternConfig
from run_benchmarks.errors import UserError

SUFFIXES = (".yaml", ".yml", ".py")


@dataclass(frozen=True)
class Extern:
    """An extern config read: its file, the workload layers (source, keys) in order, and what to tell."""

    path: Path
    layers: list[tuple[str, dict]]
    notes: list[str] = field(default_factory=list)
    settings: list[flagperf_keys.Setting] = field(default_factory=list)  # a FlagPerf file's keys

    def notes_for(self, workload: Any) -> list[str]:
        """The notes, with each case-owned FlagPerf key compared with the run's own value."""
        if not self.settings:
            return list(self.notes)
        counts = {kind: sum(s.kind == kind for s in self.settings) for kind in ("mapped", "case", "ignored")}
        lines = [*self.notes, f"read as a FlagPerf Python config, without running it: {counts['mapped']} key(s) "
                              f"mapped, {counts['case']} the case's (not applied), {counts['ignored']} ignored "
                              "(docs/vendor-onboarding.md, 'FlagPerf configs')"]
        for s in self.settings:
            said = f"{s.name} = {s.value!r} (line {s.line})"
            if s.kind == "mapped":
                done = ", ".join(f"{k} = {v!r}" for k, v in s.targets.items()) or s.why or "default"
                lines.append(f"  mapped   {said} -> {done}")
            elif s.kind == "case":
                lines.append(f"  case     {said}: {_against(s, workload)}")
            else:
                lines.append(f"  ignored  {said}: {s.why}")
        return lines


def _against(setting: flagperf_keys.Setting, workload: Any) -> str:
    if setting.compared is None:
        return f"not applied: {setting.why}"
    run = _value(workload, setting.compared)
    if _same(setting.value, run):
        return f"agrees with the run's {setting.compared} = {run!r}"
    return f"not applied: the run's {setting.compared} is {run!r} ({setting.why})"


def _value(workload: Any, dotted: str) -> Any:
    if dotted == "model.d_ff":
        return workload.model.ffn_hidden
    node = workload
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def names(folder: Path) -> list[str]:
    """The config names in a vendor's folder for one case and framework, each once."""
    return sorted({p.stem for suffix in SUFFIXES for p in folder.glob(f"config_*{suffix}")})


def find(name: str, folder: Path, what: str) -> tuple[Path, list[str]]:
    """The file ``name`` means (see the module's docstring), and a note when the choice needs one."""
    as_path = Path(name)
    if as_path.suffix in SUFFIXES and as_path.is_file():
        return as_path, []
    stem = as_path.name
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    yaml_file, py_file = folder / f"{stem}.yaml", folder / f"{stem}.py"
    chosen = yaml_file if yaml_file.is_file() else py_file if py_file.is_file() else None
    if chosen is not None:
        notes = []
        if chosen == yaml_file and py_file.is_file():
            notes.append(f"{py_file.name} is beside it and not read: the YAML wins where both are there "
                         "(delete one to silence this)")
        if as_path.suffix in SUFFIXES and as_path.suffix != chosen.suffix:
            notes.append(f"{name!r} named a {as_path.suffix} file; {chosen.name} is the one there, and is read")
        return chosen, notes
    known = names(folder)
    raise UserError(f"extern config {name!r} not found: no {yaml_file} (nor {py_file.name})",
                    f"configs for {what}: {', '.join(known) or '(none)'}")


def load(path: Path, notes: Optional[list[str]] = None) -> Extern:
    """The layers of the file at ``path``: one for a YAML file, one per setting FlagPerf key for a ``.py``."""
    notes = list(notes or [])
    if path.suffix != ".py":
        return Extern(path, [(str(path), load_model(ExternConfig, path).workload_layer())], notes)
    settings = flagperf_keys.translate(flagperf_config.read(path), path)
    layers = [(f"{path}:{s.line} ({s.name})", flagperf_keys.nested(s.targets)) for s in settings if s.targets]
    return Extern(path, layers, notes, settings)

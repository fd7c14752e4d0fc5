"""What ``accelbench list`` shows, read from the files as plain YAML: names and the few fields in its tables.

Validating ~90 case files and every vendor.yaml through their pydantic schemas cost most of ``list``'s
0.34 s (building the models is the larger part, not checking the files), for tables that show four fields
a file. So ``list`` reads each file with the same loader as every command (yaml_files.py: a YAML error
names the file, line and column and stops the command), shows what the files say, and names every file
whose shown fields are not of the expected type as a problem. ``accelbench list --check``, and any command
that plans a run, validates whole files against their schemas (cases.py, vendors.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run_benchmarks.catalog.shipped_kinds import SHIPPED_KINDS
from run_benchmarks.catalog.vendor_folders import VENDOR_FILE, vendor_folders
from run_benchmarks.catalog.yaml_files import load_yaml


@dataclass
class Listing:
    """Rows of ``list``'s tables, as text, and the files whose shown fields are malformed."""

    cases: list[tuple[str, str, str, str]] = field(default_factory=list)  # case, task, frameworks, description
    vendors: list[tuple[str, str, str, str]] = field(default_factory=list)  # vendor, hardware, description, from
    kinds: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    hardware: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _Reader:
    """Typed access to plain data that records, rather than raises, a field of the wrong type."""

    def __init__(self, problems: list[str]):
        self.problems = problems

    def get(self, data: dict, key: str, kind: type | tuple[type, ...], default: Any, where: str) -> Any:
        value = data.get(key, default)
        if value is None or isinstance(value, kind) and not isinstance(value, bool):
            return default if value is None else value
        expected = kind.__name__ if isinstance(kind, type) else "a number"
        self.problems.append(f"{where}: {key}: expected {expected}, got {type(value).__name__}")
        return default


def _names(values: Any) -> str:
    return ", ".join(map(str, values)) if isinstance(values, (list, tuple, dict)) else str(values)


def read_cases(cases_dir: Path, listing: Listing) -> None:
    """One row per ``cases/<case>/case.yaml``; task and frameworks follow ``extends`` as ResolvedCase does
    (the last file in the chain that sets one)."""
    read, files = _Reader(listing.problems), {}

    def load(name: str) -> dict:
        if name not in files:
            path = cases_dir / name / "case.yaml"
            files[name] = load_yaml(path) if path.is_file() else None
        return files[name]

    for name in sorted(p.parent.name for p in cases_dir.glob("*/case.yaml")):
        where = f"{cases_dir / name / 'case.yaml'}"
        chain, current = [], name
        while isinstance(current, str) and current not in chain:
            data = load(current)
            if data is None:
                listing.problems.append(f"{where}: extends {current!r}, which has no case.yaml")
                break
            chain.append(current)
            current = read.get(data, "extends", str, None, f"{cases_dir / current / 'case.yaml'}")
        if isinstance(current, str) and current in chain:
            listing.problems.append(f"{where}: cases extend each other in a circle: {' -> '.join(chain)}")
        task, frameworks = "pretrain", []
        for base in reversed(chain):  # the named case last, as its keys apply last
            data, at = files[base], f"{cases_dir / base / 'case.yaml'}"
            task = read.get(data, "task", str, None, at) or task
            frameworks = read.get(data, "frameworks", list, None, at) or frameworks
        description = read.get(files[name], "description", str, "", where)
        listing.cases.append((name, task, _names(frameworks), description))


def _kind_row(name: str, kind: dict, source: str) -> tuple[str, str, str, str, str, str]:
    monitor = kind.get("monitor", "none")
    if isinstance(monitor, dict):
        command = monitor.get("command") or ["?"]
        monitor = f"command: {command[0] if isinstance(command, list) else command}"
    backends = kind.get("backends") or {}
    return (name, source, f"{kind.get('torch_device', '?')} / {kind.get('paddle_device', 'cpu')}",
            str(kind.get("visible_devices_env") or "-"),
            ", ".join(f"{k} {v}" for k, v in backends.items()) if isinstance(backends, dict) else str(backends),
            str(monitor))


def _hardware_row(name: str, vendor: str, spec: dict, where: str, read: _Reader) -> tuple[str, ...]:
    peaks = read.get(spec, "peak_tflops", dict, {}, f"{where}: accelerators.{name}")
    memory = read.get(spec, "memory_gib", (int, float), None, f"{where}: accelerators.{name}")
    kind = read.get(spec, "kind", str, "?", f"{where}: accelerators.{name}")
    if kind == "?":
        read.problems.append(f"{where}: accelerators.{name}: no 'kind' (cpu, nvidia, rocm, or one declared "
                             "under kinds:)")
    return (name, vendor, kind, f"{memory:g} GiB" if memory else "host memory",
            ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in peaks.items())
            or "unknown (MFU n/a)")


def read_vendors(vendors_dir: Path, listing: Listing) -> None:
    """Vendors, their hardware, and the accelerator kinds: the shipped ones first, then each vendor's."""
    read = _Reader(listing.problems)
    kinds = [_kind_row(name, kind, "accelbench") for name, kind in SHIPPED_KINDS.items()]
    hardware = []
    folders = vendor_folders(vendors_dir)  # the checkout's and installed vendor packages'
    for vendor, folder in folders.items():
        path = folder.path / VENDOR_FILE
        data = load_yaml(path)
        accelerators = read.get(data, "accelerators", dict, {}, str(path))
        listing.vendors.append((vendor, _names(accelerators), read.get(data, "description", str, "", str(path)),
                                folder.source))
        for name, kind in read.get(data, "kinds", dict, {}, str(path)).items():
            if isinstance(kind, dict):
                kinds.append(_kind_row(str(name), kind, vendor))
            else:
                listing.problems.append(f"{path}: kinds.{name}: expected a mapping, got {type(kind).__name__}")
        for name, spec in accelerators.items():
            if isinstance(spec, dict):
                hardware.append(_hardware_row(str(name), vendor, spec, str(path), read))
            else:
                listing.problems.append(f"{path}: accelerators.{name}: expected a mapping, "
                                        f"got {type(spec).__name__}")
    listing.kinds = kinds
    listing.hardware = sorted(hardware)
    known = {row[0] for row in kinds}
    listing.problems += [f"{folders[vendor].path / VENDOR_FILE}: accelerators.{name}.kind: unknown accelerator "
                         f"kind {kind!r}" for name, vendor, kind, *_ in listing.hardware if kind not in known | {"?"}]


def read_listing(cases_dir: Path, vendors_dir: Path) -> Listing:
    listing = Listing()
    read_cases(cases_dir, listing)
    read_vendors(vendors_dir, listing)
    return listing

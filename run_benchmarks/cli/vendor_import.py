"""``accelbench vendor import-flagperf FOLDER``: a FlagPerf vendor folder's Python configs as accelbench YAML, so
a vendor moves once.

FlagPerf keeps a vendor's configs as ``<FOLDER>/<case>-<framework>/config/config_X.py``. Each is read the way a
run reads it (never run: catalog/flagperf_config; keys mapped: catalog/flagperf_keys) and written as
``vendors/<vendor>/<case>/<framework>/config_X.yaml``: the mapped keys as values, each with a comment naming the
FlagPerf key and line it came from, the file's path and sha256 at the top, and the keys not applied (the
case's, or ignored) listed at the end with why. Comments carry user text only as ``repr``, so no value can
break out of its line. An existing YAML is kept unless ``--force``; a config that cannot be read is reported
and the rest still converted (exit 1 then).
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from run_benchmarks.catalog import flagperf_config, flagperf_keys
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.config import describe, parse_yaml
from run_benchmarks.catalog.config_files import ExternConfig
from run_benchmarks.catalog.vendor_folders import vendor_folder
from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import component, write_text_atomically
from run_benchmarks.plan import Paths


def _line(text: str) -> str:
    """``text`` safe inside one comment line."""
    return text if text.isprintable() else repr(text)


def convert(py: Path, shown: str, case: str) -> str:
    """The YAML text of the FlagPerf config ``py`` (``shown``: how the comment names it)."""
    raw = py.read_bytes()
    settings = flagperf_keys.translate(flagperf_config.parse_assignments(flagperf_config.read_text(py), str(py)), py)
    values: dict[str, tuple[object, list[str]]] = {}  # accelbench key -> value, the FlagPerf keys that set it
    for s in settings:  # two keys may set one (fp16 and bf16: train.precision), always to one value (translate)
        for dotted, value in s.targets.items():
            values.setdefault(dotted, (value, []))[1].append(f"{s.name} = {s.value!r} (line {s.line})")
    sections: dict[str, list[str]] = {"train": [], "parallel": []}
    for dotted, (value, sources) in values.items():
        section, key = dotted.split(".", 1)
        sections[section].append(f"  {key}: {json.dumps(value)}  # {', '.join(sources)}")
    lines = [f"# Converted from FlagPerf's {_line(shown)} (sha256 {hashlib.sha256(raw).hexdigest()}) by",
             "# `accelbench vendor import-flagperf`: each value names the FlagPerf key and line it came from; the keys",
             "# not applied are listed at the end (docs/vendor-onboarding.md, 'FlagPerf configs').",
             f"description: {json.dumps(f'{case}: converted from FlagPerf {py.name}')}"]
    for section, entries in sections.items():
        if entries:
            lines += [f"{section}:", *entries]
    for kind, title in (("case", "the case's, not applied"), ("ignored", "ignored")):
        held = [s for s in settings if s.kind == kind]
        if held:
            lines.append(f"# {title}:")
            lines += [f"#   {s.name} = {s.value!r} (line {s.line}): {_line(s.why)}" for s in held]
    return "\n".join(lines) + "\n"


def cmd_import_flagperf(args: argparse.Namespace, console: Console, root: Path) -> int:
    folder = args.folder.resolve()
    if not folder.is_dir():
        raise UserError(f"{args.folder}: not a folder", "give FlagPerf's training/<vendor>/ folder")
    paths = Paths(root)
    vendor = component(args.vendor or folder.name, "vendor", "name it with --vendor")
    if not (vendor_folder(paths.vendors_dir, vendor) / "vendor.yaml").is_file():
        raise UserError(f"vendor {vendor!r} has no {vendor_folder(paths.vendors_dir, vendor) / 'vendor.yaml'}",
                        f"make it first (accelbench vendor new {vendor}), or name another with --vendor")
    catalog = CaseCatalog(paths.cases_dir, paths.vendors_dir)
    configs = sorted(folder.rglob("config_*.py"))
    if not configs:
        raise UserError(f"{args.folder}: no config_*.py under it", "give FlagPerf's training/<vendor>/ folder, "
                                                                   "which holds <case>-<framework>/config/config_*.py")
    done = {"written": 0, "kept": 0, "refused": 0}
    for py in configs:
        shown = str(py.relative_to(folder.parent))
        case_dir = py.parent.parent if py.parent.name == "config" else py.parent
        case, _, framework = case_dir.name.rpartition("-")
        try:
            if not case or case not in catalog.names():
                raise UserError(f"folder {case_dir.name!r} is not <case>-<framework> with a case of {paths.cases_dir}",
                                "add the case first, or convert this config by hand")
            target = catalog.extern_dir(vendor, component(case, "case", "rename the folder"),
                                        component(framework, "framework", "rename the folder")) / f"{py.stem}.yaml"
            text = convert(py, shown, case)
            if target.exists() and not args.force:
                done["kept"] += 1
                console.print(f"kept      {target} (there already; --force replaces it)", markup=False, soft_wrap=True)
                continue
            done["written"] += 1
            if args.dry_run:
                console.print(f"would write {target} <- {shown}:\n{text}", markup=False, soft_wrap=True)
                continue
            try:  # what a run will read, checked before it is written
                ExternConfig.model_validate(parse_yaml(text, str(target)))
            except ValidationError as exc:
                raise describe(exc, ExternConfig, str(target)) from None
            target.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(target, text)
            console.print(f"wrote     {target} <- {shown}", markup=False, soft_wrap=True)
        except UserError as exc:
            done["refused"] += 1
            console.print(f"refused   {shown}: {exc}", markup=False, soft_wrap=True)
    console.print(f"{len(configs)} FlagPerf config(s): " + ", ".join(f"{n} {what}" for what, n in done.items())
                  + f"{' (dry run)' if args.dry_run else ''}; check them planned on their layouts: "
                  f"accelbench vendor check {vendor}", markup=False, soft_wrap=True)
    return EXIT_FAILED if done["refused"] else EXIT_OK

"""``accelbench vendor new`` and ``vendor check``: a vendor folder from the template, and everything
about one validated before any host is touched.

The check reports every finding, file by file, instead of stopping at the first: a vendor engineer
fixes them in one pass. Extern configs are checked the way a run would use them: each is planned
(dry) on the accelerator and node layout its name states, so a layout that does not fit its node
count is caught here and not on the cluster, and each planned workload is held against its case's policy:
every departure is listed.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from training.contract.monitors import MONITORS

from run_benchmarks.catalog import fairness, measured_peaks
from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.cli import vendor_probe
from run_benchmarks.catalog.config_files import ClusterSpec, HostSpec, TestConf
from run_benchmarks.catalog.config import load_model
from run_benchmarks.catalog.kinds import KINDS
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import component
from run_benchmarks.plan import Paths, PlanInputs
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.catalog.vendor_folders import describe, package_vendors, vendor_folders
from run_benchmarks.catalog.vendors import VendorRegistry, VendorSpec, accelerator_in_config_name

TEMPLATE = "template"
PLACEHOLDER = "__VENDOR__"
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
LAYOUT_SUFFIX = re.compile(r"x(\d+)x(\d+)$")


@dataclass(frozen=True)
class Finding:
    path: Path
    problem: str
    fix: str = ""
    severity: str = "error"  # error | warning | info (what a tool run here printed and parsed)


def scaffold(vendors_dir: Path, name: str) -> Path:
    """Copy vendors/template to vendors/<name>, with the name filled in."""
    component(name, "vendor name", "use lower-case letters, digits and '_', e.g. acme")
    if not NAME.match(name):
        raise UserError(f"vendor name {name!r} is not valid", "use lower-case letters, digits and '_', e.g. acme")
    source, target = vendors_dir / TEMPLATE, vendors_dir / name
    if not source.is_dir():
        raise UserError(f"{source} is missing", "restore vendors/template from the accelbench checkout")
    if target.exists():
        raise UserError(f"{target} already exists", f"check it with: accelbench vendor check {name}")
    installed = {folder.name: folder for folder in package_vendors()}
    if name in installed:
        raise UserError(f"vendor {name!r} is declared by {describe(installed[name])}",
                        "choose another name, or uninstall the package")
    shutil.copytree(source, target)
    for path in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):  # files before folders
        if path.is_file():
            path.write_text(path.read_text(encoding="utf-8").replace(PLACEHOLDER, name), encoding="utf-8")
        if PLACEHOLDER in path.name:
            path.rename(path.with_name(path.name.replace(PLACEHOLDER, name)))
    return target


def _todos(folder: Path) -> list[Finding]:
    """Every value of the vendor's files that still says TODO (left from the template). Comments do not count:
    the template's commented examples and hints may stay (YAML: its scalars only; requirements.txt and
    Dockerfiles: what is not a # comment)."""
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".yaml", ".txt", "")
                       and "wheels" not in p.parts):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        numbers = _todo_values(path, lines) if path.suffix == ".yaml" else [
            n for n, line in enumerate(lines, 1) if "TODO" in re.sub(r"(^|\s)#.*$", "", line)]
        for number in numbers:
            out.append(Finding(path, f"line {number} still says TODO: {lines[number - 1].strip()}",
                               "replace it with the real value (or delete the line where optional)"))
    return out


def _todo_values(path: Path, lines: list[str]) -> list[int]:
    """The lines of the YAML scalars (keys or values) holding TODO; a file YAML cannot read: every such line."""
    try:
        root = yaml.compose("\n".join(lines), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return [n for n, line in enumerate(lines, 1) if "TODO" in line]
    found, seen, stack = set(), set(), [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias points at a node already walked
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if "TODO" in str(node.value):
                found.add(node.start_mark.line + 1)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(item for pair in node.value for item in pair)
    return sorted(found)


def check(root: Path, name: str, run_tools: bool = False) -> list[Finding]:
    component(name, "vendor name", "name a folder under vendors/, e.g. nvidia")
    paths = Paths(root)
    folders = vendor_folders(paths.vendors_dir)  # the checkout's and installed packages'
    folder = folders[name].path if name in folders else paths.vendors_dir / name
    vendor_file = folder / "vendor.yaml"
    if not vendor_file.is_file():
        known = ", ".join(folders) or "(none)"
        return [Finding(vendor_file, "missing", f"create it: accelbench vendor new {name} (known vendors: {known})")]
    try:
        spec = load_model(VendorSpec, vendor_file)
    except UserError as exc:
        return [Finding(vendor_file, exc.message.removeprefix(f"{vendor_file}: "), exc.fix or "")]
    findings: list[Finding] = _todos(folder) if name != TEMPLATE else []
    findings += _check_peaks(vendor_file, spec)
    findings += _fairness(vendor_file, spec)
    findings += _check_images(folder, vendor_file, spec)
    findings += _check_kinds(vendor_file, spec)
    # the tools of the kinds its accelerators use (its own, or shipped ones), installed here: run only when asked
    # (the file may be a contributed folder under review, and it can name any command)
    used = {accel.kind for accel in spec.accelerators.values()} | set(spec.kinds)
    for kind_name in sorted(used):
        kind = spec.kinds.get(kind_name) or (KINDS.get(kind_name) if kind_name in KINDS else None)
        if kind is None:
            continue
        if run_tools:
            findings += [Finding(vendor_file, problem, fix, severity)
                         for severity, problem, fix in vendor_probe.probe(f"kinds.{kind_name}", kind, paths.root, folder)]
        else:
            findings += [Finding(vendor_file, f"not run: {command}", "read it, then pass --run-tools to run it "
                                 "here and see what accelbench parses from it", "info")
                         for command in vendor_probe.commands(f"kinds.{kind_name}", kind, paths.root, folder)]
    if name != TEMPLATE:
        try:
            registry = VendorRegistry(paths.vendors_dir)  # hardware and kind names unique, kinds known
        except UserError as exc:
            return findings + [Finding(vendor_file, exc.message, exc.fix or "")]
        monitors = {hw.monitor if isinstance(hw.monitor, str) else "command"
                    for hw in registry.hardware.values() if hw.vendor == name}
        findings += [f for monitor in sorted(monitors) for f in _check_monitor(vendor_file, monitor)]
        findings += _check_extern_configs(paths, folder, name, spec)
    return findings


def _check_kinds(vendor_file: Path, spec: VendorSpec) -> list[Finding]:
    """A kind a vendor declares is checked for the parts a run relies on; gaps are warnings with their cost."""
    out = []
    for name, kind in spec.kinds.items():
        where = f"kinds.{name}"
        if kind.torch_device != "cpu" and not kind.device_count:
            out.append(Finding(vendor_file, f"{where}.device_count is not set: preflight cannot tell whether a "
                                            "host has a device per process", "add the smi tool's list command and "
                                                                              "a pattern", "warning"))
        if kind.torch_device != "cpu" and not kind.visible_devices_env:
            out.append(Finding(vendor_file, f"{where}.visible_devices_env is not set: hosts cannot pin devices",
                               "name the variable the runtime reads (ASCEND_RT_VISIBLE_DEVICES, ...)", "warning"))
        for framework in spec.frameworks:
            if framework not in kind.backends:
                out.append(Finding(vendor_file, f"{where}.backends has no {framework} backend: the framework's "
                                                "default for the device is used", f"set backends.{framework} "
                                                                                  "(hccl, cncl, xccl, ...)",
                                   "warning"))
        plugin = vendor_file.parent / (kind.worker_plugin or "").removeprefix("{vendor_dir}/")
        if kind.worker_plugin and not plugin.is_file():
            out.append(Finding(vendor_file, f"{where}.worker_plugin: {plugin} does not exist",
                               "add the file, or remove worker_plugin"))
    return out


def _check_peaks(vendor_file: Path, spec: VendorSpec) -> list[Finding]:
    out = []
    for hw, accel in spec.accelerators.items():
        missing = accel.missing_peaks()
        if missing:
            out.append(Finding(vendor_file, f"accelerators.{hw}.peak_tflops: no dense peak for {', '.join(missing)}",
                               "add them from the datasheet (dense, no sparsity), list the ones the part lacks "
                               "under unsupported_dtypes, or explain under peak_note why there are none"))
        if accel.kind != "cpu" and not accel.memory_gib:
            out.append(Finding(vendor_file, f"accelerators.{hw}.memory_gib is not set",
                               "set the device memory in GiB (reports show memory as actual / total)", "warning"))
    return out


def _fairness(vendor_file: Path, spec: VendorSpec) -> list[Finding]:
    """catalog/fairness.py's lint: peaks far above the calibrated GEMM (sparse figures?), devices not defined."""
    try:
        measured = measured_peaks.load(vendor_file.parent).accelerators
    except UserError as exc:
        return [Finding(vendor_file.parent / measured_peaks.FILE_NAME, exc.message, exc.fix or "")]
    out = []
    for hw, accel in spec.accelerators.items():
        kind = spec.kinds.get(accel.kind) or (KINDS.get(accel.kind) if accel.kind in KINDS else None)
        found = fairness.device_definition(hw, accel.dies_per_device, accel.devices_per_card,
                                           kind is not None and kind.torch_device == "cpu")
        found += fairness.sparse_peaks(hw, dict(accel.peak_tflops), measured.get(hw, {}))
        out += [Finding(vendor_file, problem, fix, severity) for problem, fix, severity in found]
    return out


def _check_images(folder: Path, vendor_file: Path, spec: VendorSpec) -> list[Finding]:
    out = []
    if not spec.frameworks:
        out.append(Finding(vendor_file, "frameworks: none declared", "declare torch and/or paddle with their env"))
    for framework, runtime in spec.frameworks.items():
        dockerfiles = sorted((folder / "docker").glob(f"{framework}_*/Dockerfile"))
        if runtime.image is None and not dockerfiles:
            out.append(Finding(folder / "docker", f"no Dockerfile for {framework} (docker/{framework}_<version>/"
                                                  "Dockerfile) and no frameworks." + framework + ".image",
                               "add a Dockerfile (see vendors/template/docker/) or name a prebuilt image"))
        for dockerfile in dockerfiles:
            if not re.search(r"^\s*FROM\s", dockerfile.read_text(encoding="utf-8"), re.MULTILINE):
                out.append(Finding(dockerfile, "has no FROM line", "start it from a base image"))
        if runtime.container.privileged:
            out.append(Finding(vendor_file, f"frameworks.{framework}.container.privileged is true",
                               "grant only what is needed (devices, cap_add) unless the runtime truly needs it",
                               "warning"))
    return out


def _check_monitor(vendor_file: Path, monitor: str) -> list[Finding]:
    """What the monitor's sampler needs (the contract's list, training/contract/monitors.py), looked for on this
    machine as a hint only: found, never imported."""
    spec = MONITORS.get(monitor)
    if spec is not None and spec.needs and importlib.util.find_spec(spec.needs) is None:
        return [Finding(vendor_file, f"monitor {monitor}: {spec.needs} is not importable on this machine",
                        f"install it where the nodes run (pip install {spec.install}); "
                        "without it the monitor records a warning, never a failure", "warning")]
    return []


def _check_extern_configs(paths: Paths, folder: Path, vendor: str, spec: VendorSpec) -> list[Finding]:
    out = []
    catalog = CaseCatalog(paths.cases_dir, paths.vendors_dir)
    configs = [*folder.glob("*/*/config_*.yaml"), *folder.glob("*/*/config_*.py")]  # FlagPerf's .py too
    for config in sorted(configs):
        case, framework = config.parent.parent.name, config.parent.name
        if case not in catalog.names():
            out.append(Finding(config, f"case {case!r} does not exist under cases/",
                               f"name the folder after a case ({', '.join(catalog.names()[:5])}, ...)"))
            continue
        if framework not in spec.frameworks:
            out.append(Finding(config, f"framework {framework!r} is not declared in {folder / 'vendor.yaml'} "
                                       f"(frameworks: {', '.join(spec.frameworks) or 'none'})",
                               f"declare frameworks.{framework} there, or move the config under a declared "
                               "framework's folder"))
            continue
        layout = LAYOUT_SUFFIX.search(config.stem)
        hardware = accelerator_in_config_name(config.stem, spec)
        if not layout or hardware is None:
            names = ", ".join(f"{hw}" + (f" (or {', '.join(a.config_names)})" if a.config_names else "")
                              for hw, a in spec.accelerators.items())
            out.append(Finding(config, "the name does not end in <accelerator>x<nnodes>x<nprocs> with one of this "
                                       f"vendor's accelerators: {names}",
                               f"name it like config_TP1PP1SH1SP8{next(iter(spec.accelerators))}x1x8"))
            continue
        nnodes, nprocs = int(layout.group(1)), int(layout.group(2))
        cluster = ClusterSpec(hosts=[HostSpec(name=f"node{i}") for i in range(nnodes)])
        inputs = PlanInputs(paths, TestConf(), paths.configs_dir / "test_conf.yaml", cluster,
                            paths.configs_dir / "cluster.yaml", VendorRegistry(paths.vendors_dir), catalog, "python3")
        try:
            plan = build_run_plan(inputs, [f"{case}:{framework}:{hardware}:{nnodes}:{nprocs}"], "vendor-check",
                                  paths.root / "logs", str(config), (), None)
        except UserError as exc:
            out.append(Finding(config, exc.message.removeprefix(f"{config}: "), exc.fix or ""))
            continue
        out += _policy_findings(config, plan.cases[0].compliance)
    return out


def _policy_findings(config: Path, verdict) -> list[Finding]:
    """The config held against its case's policy: each departure is an error (its runs would be marked
    non-compliant and ranked apart from every compliant run of the case)."""
    if verdict is None:
        return [Finding(config, "not held against a policy: the tree has no cases/policy.yaml",
                        "restore cases/policy.yaml from the accelbench checkout", "warning")]
    return [Finding(config, f"departs from its case's policy: {d.sentence()}",
                    f"leave {d.key} to the case, or change the case's policy ({d.policy_file}) if the published "
                    "benchmark allows it") for d in verdict.departures]

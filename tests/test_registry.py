"""The one registry style both halves use (training/contract/registry.py): a plugin named by module is
imported on its first lookup, never before; an unknown name is refused with the closest known one, as a
UserError in the orchestrator; an entry may be present but unusable, and says why; every built-in entry of
every registry is registered one way, by path; the registries that pair two halves agree."""
from __future__ import annotations

import ast
import sys

import pytest

from run_benchmarks.errors import UserError
from run_benchmarks.registry import Registry as OrchestratorRegistry
from training.contract.registry import Registry, UnknownName, Unusable

from .conftest import ROOT


def test_a_plugin_named_by_module_is_imported_on_its_first_lookup_only():
    plugins: Registry = Registry("sampler")
    plugins.register("json", "json.decoder:JSONDecoder")  # a stand-in plugin: any importable attribute
    plugins.register("colorsys", "colorsys:rgb_to_hsv")
    sys.modules.pop("colorsys", None)
    assert "colorsys" in plugins and "colorsys" not in sys.modules  # known by name, not yet imported
    assert plugins.get("colorsys")(1, 0, 0) == (0.0, 1.0, 1.0) and "colorsys" in sys.modules
    assert list(plugins) == ["colorsys", "json"]


def test_built_in_parsers_are_known_by_path_before_their_modules_load():
    """(Was: modules register themselves before the first lookup; the parsers are registered by path now.)"""
    from run_benchmarks.results.importers.parsers import PARSERS

    assert "mllog/1" in PARSERS and PARSERS.get("megatron/1").format == "megatron"


def test_an_unknown_name_is_refused_with_the_closest_and_a_name_is_taken_once():
    workers: Registry = Registry("accelerator monitor")
    workers.register("nvml", object())
    with pytest.raises(UnknownName, match="did you mean 'nvml'"):
        workers.get("nmvl")
    orchestrator: OrchestratorRegistry = OrchestratorRegistry("framework")
    orchestrator.register("torch", object())
    with pytest.raises(UserError, match="unknown framework 'toch'") as refused:
        orchestrator.get("toch")
    assert "did you mean 'torch'" in refused.value.fix
    with pytest.raises(UserError, match="declared twice"):
        orchestrator.register("torch", object())


# ---------------------------------------------------------------- one way in, for every built-in


def _registries():
    """Every registry of both halves, by where it lives (a new one must be added here: the next test finds it)."""
    from run_benchmarks.backends.hosts import BACKENDS
    from run_benchmarks.backends.launchers import LAUNCHERS
    from run_benchmarks.backends.runtimes import RUNTIMES
    from run_benchmarks.backends.schedulers import SCHEDULERS
    from run_benchmarks.catalog.frameworks import FRAMEWORKS
    from run_benchmarks.catalog.kinds import KINDS
    from run_benchmarks.cli.main import COMMANDS
    from run_benchmarks.results.history.formats import HISTORY_FORMATS
    from run_benchmarks.results.importers.parsers import PARSERS
    from run_benchmarks.results.report.formats import COMPARE_FORMATS, REPORT_FORMATS, SWEEP_FORMATS, TABLE_FORMATS
    from run_benchmarks.results.tables import TABLES
    from training.micro.case import BENCHES, FRAMEWORK_OPS
    from training.monitor import ACCELERATORS
    from training.workers import START, WORKERS

    return {"BACKENDS": BACKENDS, "LAUNCHERS": LAUNCHERS, "RUNTIMES": RUNTIMES, "SCHEDULERS": SCHEDULERS,
            "FRAMEWORKS": FRAMEWORKS, "KINDS": KINDS, "COMMANDS": COMMANDS, "PARSERS": PARSERS,
            "REPORT_FORMATS": REPORT_FORMATS, "COMPARE_FORMATS": COMPARE_FORMATS, "TABLE_FORMATS": TABLE_FORMATS,
            "SWEEP_FORMATS": SWEEP_FORMATS, "TABLES": TABLES, "HISTORY_FORMATS": HISTORY_FORMATS,
            "BENCHES": BENCHES, "FRAMEWORK_OPS": FRAMEWORK_OPS, "ACCELERATORS": ACCELERATORS, "WORKERS": WORKERS,
            "START": START}


def test_every_built_in_entry_of_every_registry_is_registered_by_path():
    for name, registry in _registries().items():
        assert list(registry), name
        assert sorted(registry.paths()) == list(registry), f"{name}: {set(registry) - set(registry.paths())}"


def test_every_registry_in_the_code_is_checked_and_none_is_filled_by_a_decorator():
    """Each ``NAME = Registry(...)`` of both halves is one the test above checks; no built-in registers itself
    with ``@REGISTRY.register(...)`` or by being imported (``modules=``)."""
    made, decorated = set(), []
    for half in ("run_benchmarks", "training"):
        for path in (ROOT / half).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call) \
                        and getattr(node.value.func, "id", "") == "Registry":
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    made.add(target.id if isinstance(target, ast.Name) else ast.unparse(target))
                    assert not any(k.arg == "modules" for k in node.value.keywords), path
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    decorated += [f"{path.name}:{node.name}" for d in node.decorator_list
                                  if "register" in ast.unparse(d)]
    made.discard("self.kinds")  # VendorRegistry: the shipped kinds copied, a vendor's own added from its yaml
    assert made == set(_registries()), made ^ set(_registries())
    assert decorated == []


def test_an_entry_may_be_present_but_unusable_and_says_why(tmp_path, monkeypatch):
    """ReFrame's backends registered with their error: listed like any other, refused with why and the fix. A
    path whose module needs a library missing here is one; a module of the registering package missing is a
    defect and raises."""
    from run_benchmarks.backends.launchers import LAUNCHERS

    (tmp_path / "stand_in_plugin.py").write_text("import library_not_installed_here\nLauncher = object\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    launchers = LAUNCHERS.copy()
    launchers.register("mpirun", Unusable("no framework's worker runs under mpirun yet", "use torchrun"))
    launchers.register("stand-in", "stand_in_plugin:Launcher")
    assert "mpirun" in launchers and "stand-in" in launchers and "torchrun" in list(launchers)
    with pytest.raises(UserError, match="launcher 'mpirun' is present but unusable here: no framework's") as refused:
        launchers.get("mpirun")
    assert refused.value.fix == "use torchrun"
    with pytest.raises(UserError, match="needs the Python module library_not_installed_here, which is not "
                                        "installed here") as refused:
        launchers.get("stand-in")
    assert "install it" in refused.value.fix
    assert launchers.unusable("stand-in").why.startswith("it needs") and launchers.unusable("torchrun") is None
    broken: Registry = Registry("plugin")
    broken.register("typo", "training.contract.no_such_module:x")
    with pytest.raises(ModuleNotFoundError):
        broken.get("typo")


def test_the_workers_and_the_frameworks_declared_tasks_agree():
    """Each (framework, task) the catalog declares runnable has a worker entry (training/workers.py), and no
    worker exists for a pair the planner would refuse."""
    from run_benchmarks.catalog.frameworks import FRAMEWORKS
    from training import workers
    from training.contract.tasks import TASKS

    for name, framework in FRAMEWORKS.items():
        assert sorted(framework.tasks) == sorted(workers.tasks_of(name)), name
        assert set(framework.tasks) <= set(TASKS)
    assert sorted(workers.START) == sorted(FRAMEWORKS)


def test_the_monitor_list_is_the_contracts():
    """One list (training/contract/monitors.py): the worker's samplers, the schema's names and what vendor check
    looks for all come from it."""
    import typing

    from training.contract.monitors import MONITOR_NAMES, MONITORS, NO_MONITOR
    from training.contract.spec import MonitorName
    from training.monitor import ACCELERATORS

    assert list(ACCELERATORS) == sorted(MONITORS) and typing.get_args(MonitorName) == MONITOR_NAMES
    assert MONITOR_NAMES[-1] == NO_MONITOR
    assert "MONITOR_MODULES" not in (ROOT / "run_benchmarks/cli/vendor.py").read_text()


def test_commands_pick_a_report_format_by_name_not_by_an_if_chain():
    """report, compare, table and sweep render through the format registries; their --format choices are the
    registries' names."""
    from run_benchmarks.cli.arguments import build_parser
    from run_benchmarks.results.report.formats import COMPARE_FORMATS, REPORT_FORMATS, SWEEP_FORMATS, TABLE_FORMATS

    for module in ("report", "table", "sweep"):
        tree = ast.parse((ROOT / f"run_benchmarks/cli/{module}.py").read_text())
        compared = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                    and "args.format" in ast.unparse(n)]
        assert compared == [], module
    commands = build_parser()._subparsers._group_actions[0].choices
    for command, registry in (("report", REPORT_FORMATS), ("compare", COMPARE_FORMATS), ("table", TABLE_FORMATS),
                              ("sweep", SWEEP_FORMATS)):
        (choices,) = [a.choices for a in commands[command]._actions if "--format" in a.option_strings]
        assert choices == list(registry), command

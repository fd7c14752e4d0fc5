"""The one registry style both halves use (training/contract/registry.py): a plugin named by module is
imported on its first lookup, never before; an unknown name is refused with the closest known one, as a
UserError in the orchestrator."""
from __future__ import annotations

import sys

import pytest

from run_benchmarks.errors import UserError
from run_benchmarks.registry import Registry as OrchestratorRegistry
from training.contract.registry import Registry, UnknownName


def test_a_plugin_named_by_module_is_imported_on_its_first_lookup_only():
    plugins: Registry = Registry("sampler")
    plugins.register("json", "json.decoder:JSONDecoder")  # a stand-in plugin: any importable attribute
    plugins.register("colorsys", "colorsys:rgb_to_hsv")
    sys.modules.pop("colorsys", None)
    assert "colorsys" in plugins and "colorsys" not in sys.modules  # known by name, not yet imported
    assert plugins.get("colorsys")(1, 0, 0) == (0.0, 1.0, 1.0) and "colorsys" in sys.modules
    assert list(plugins) == ["colorsys", "json"]


def test_modules_register_themselves_before_the_first_lookup():
    from run_benchmarks.results.importers import PARSERS

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

"""A vendor's worker hooks: the one file an accelerator kind may name as ``worker_plugin``.

The file lives in the vendor's folder (``vendors/<vendor>/<file>.py``, or an installed vendor package's
folder), named ``{vendor_dir}/<file>.py``, so a new kind needs no edit to ``training/``. Both
hooks are optional:

  setup(device_spec)  called before the framework touches the device (drivers, environment variables)
  environment()       a dict merged into the node environment local rank 0 reports
"""
from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Optional

from training.contract.names import expand_vendor_dir
from training.contract.spec import DeviceSpec


def code_root() -> str:
    """The folder that holds ``training/`` (and ``vendors/``) on this node."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class WorkerPlugin:
    def __init__(self, module: ModuleType):
        self.module = module

    def setup(self, device: DeviceSpec) -> None:
        hook = getattr(self.module, "setup", None)
        if hook is not None:
            hook(device)

    def environment(self) -> dict:
        hook = getattr(self.module, "environment", None)
        if hook is None:
            return {}
        facts = hook()
        if not isinstance(facts, dict):
            raise TypeError(f"worker plugin {self.module.__file__}: environment() returned "
                            f"{type(facts).__name__}, not a dict")
        return facts


def load(device: DeviceSpec, root: Optional[str] = None) -> Optional[WorkerPlugin]:
    """The kind's worker plugin, imported from its file, or None when the kind names none. The file is
    ``{vendor_dir}/<file>`` (the vendor's folder on this node, wherever it lives: training/contract/names.py),
    or a path relative to the code root."""
    if not device.worker_plugin:
        return None
    path = os.path.join(root or code_root(), expand_vendor_dir(device.worker_plugin))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"accelerator kind {device.kind}: worker_plugin {device.worker_plugin} is not "
                                f"a file ({path})")
    name = "accelbench_worker_plugin_" + "".join(c if c.isalnum() else "_" for c in device.kind)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return WorkerPlugin(module)

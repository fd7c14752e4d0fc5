"""The monitor in this process: SIGTERM ends it at once, not at the end of its sampling interval (the round's
stop waits on it), and it reads a built-in accelerator monitor's name from the worker config without the
contract's schemas (their import would take CPU from the ranks starting beside it)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pydantic
import pytest

from training.contract.names import MONITOR_HOST_FILE, MONITOR_STATUS_FILE
from training.contract.spec import CommandMonitorSpec
from training.monitor.__main__ import accelerator_of, main

from .conftest import ROOT


@pytest.fixture
def restored_signals():
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, handler)


def test_sigterm_ends_the_monitor_within_its_interval(tmp_path, restored_signals):
    sent: list[float] = []

    def sampled() -> bool:
        host = tmp_path / MONITOR_HOST_FILE
        return host.is_file() and host.read_text().endswith("\n")

    def term_once_it_sampled() -> None:
        # not at a fixed 0.2 s: a loaded machine may not have taken the first sample by then (none is taken once
        # the stop came), nor even installed the handler (SIGTERM's default action would end pytest)
        deadline = time.monotonic() + 30
        while not sampled() and time.monotonic() < deadline:
            time.sleep(0.01)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Thread(target=term_once_it_sampled)
    timer.start()
    code = main(["--accelerator", "none", "--interval", "30", "--out", str(tmp_path)])
    took = time.monotonic() - sent[0]
    timer.join()
    assert code == 0
    assert took < 5, f"the monitor waited {took:.1f} s of its 30 s interval before it stopped"
    assert len((tmp_path / MONITOR_HOST_FILE).read_text().splitlines()) == 1  # the first sample, at once
    assert json.loads((tmp_path / MONITOR_STATUS_FILE).read_text())["interval_s"] == 30


def test_another_signal_does_not_cut_the_interval_short(tmp_path, restored_signals):
    """A signal with a Python handler also writes the wake-up byte: drained, the wait goes on to its end."""
    old = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        began = time.monotonic()
        main(["--accelerator", "none", "--interval", "0.4", "--duration", "0.3", "--out", str(tmp_path)])
        assert time.monotonic() - began >= 0.35  # slept out the interval despite the byte at 0.05 s
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert len((tmp_path / MONITOR_HOST_FILE).read_text().splitlines()) == 1


def _config(tmp_path, monitor) -> os.PathLike:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"runtime": {"device": {"kind": "k", "monitor": monitor}}}))
    return path


def test_a_built_in_monitor_is_read_as_its_name_and_a_command_through_the_schema(tmp_path):
    assert accelerator_of(_config(tmp_path, "cpu")) == "cpu"
    command = {"command": ["smi", "--csv"], "format": "csv", "columns": ["index", "util_percent"]}
    spec = accelerator_of(_config(tmp_path, command))
    assert isinstance(spec, CommandMonitorSpec) and spec.command == ("smi", "--csv")
    with pytest.raises(pydantic.ValidationError):
        accelerator_of(_config(tmp_path, {**command, "format": "xml"}))


def _module_level_imports(module: str, seen: set[str]) -> set[str]:
    """Every module ``module`` imports when it loads, following this tree's own modules (imports inside
    functions and under ``if TYPE_CHECKING`` are left out: they do not run at load)."""
    import ast
    import importlib.util

    if module in seen:
        return seen
    seen.add(module)
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.startswith(str(ROOT)):
        return seen
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    names = []
    for node in tree.body:  # module level only
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    for name in names:  # "package.module" or "package.module.attribute": only modules are followed
        try:
            if importlib.util.find_spec(name) is not None:
                _module_level_imports(name, seen)
        except ModuleNotFoundError:  # an attribute of a module, not a module
            pass
    return seen


def test_the_monitor_loads_neither_pydantic_nor_the_workload_schema():
    loaded = _module_level_imports("training.monitor.__main__", set())
    assert "training.contract.readings" in loaded and "psutil" not in loaded  # psutil: opened by the samplers
    assert not {"pydantic", "training.contract.spec"} & loaded, sorted(loaded)

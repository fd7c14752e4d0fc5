"""The one worker harness: ranks, records, fault injection, vendor plugins, and the unsupported path.

A fake framework drives the harness in-process (what it does with any
framework's figures); real torch and Paddle workers run as subprocesses of the
entry module, as a launcher starts them.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from training import harness, plugins, train_task
from training.contract import perflog
from training.contract.names import ENV_NODE_RANK, EXIT_UNSUPPORTED, WORKER_MODULE
from training.faults import OOM_REQUEST_BYTES
from training.contract.spec import (DebugSpec, DeviceSpec, ModelSpec, RuntimeSpec, TrainSpec, WorkerConfig, WorkloadSpec)
from training.unsupported import UnsupportedOnDevice

from .conftest import ROOT

TINY = ModelSpec(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=16)
LAUNCHER = harness.RankVariables(rank="FAKE_RANK", world_size="FAKE_WORLD", local_rank="FAKE_LOCAL",
                                 node_rank="FAKE_NODE")
PLUGIN = '''
import os
seen = []

def setup(device_spec):
    seen.append(device_spec.kind)
    os.environ["ACME_PLUGIN_SETUP"] = device_spec.kind

def environment():
    return {"acme_firmware": "1.2.3"}
'''


def config(framework: str = "torch", precision: str = "fp32", steps: int = 3, debug: DebugSpec = DebugSpec(),
           **device) -> WorkerConfig:
    return WorkerConfig(
        workload=WorkloadSpec(model=TINY, train=TrainSpec(micro_batch_size=2, steps=steps, warmup_steps=1,
                                                          precision=precision), debug=debug),
        runtime=RuntimeSpec(case_name="tiny", run_id="r", round=1, framework=framework,
                            device=DeviceSpec(**{"kind": "cpu", **device})))


def records(text: str) -> list:
    return [r for r in map(perflog.parse_line, text.splitlines()) if r is not None]


class FakeWorker(harness.FrameworkWorker):
    """A framework whose every figure is known, on an accelerator unless told otherwise."""

    framework, version, device = "fake", "0.1", "acme:0"
    n_params, trainable_params, model_parallel_size = 100, 80, 2
    data_description = {"source": "synthetic"}
    on_cpu = False

    def __init__(self, cfg: WorkerConfig, ranks: harness.Ranks):
        self.calls: list[str] = []
        self.plugin_ran_first = os.environ.get("ACME_PLUGIN_SETUP") == cfg.runtime.device.kind
        FakeWorker.last = self

    def synchronize(self) -> None:
        self.calls.append("sync")

    def train_step(self) -> harness.StepWork:
        self.calls.append("step")
        return harness.StepWork(loss=2.5, tokens=64, effective_tokens=33, flops=1e6)

    def after_step(self, work: harness.StepWork):
        self.calls.append("after")
        return work.loss, float("inf")  # an fp16 step skipped on overflow

    def memory(self) -> harness.DeviceMemory:
        return harness.DeviceMemory(peak_allocated=10, peak_reserved=20, total=30)

    def reset_peak_memory(self) -> None:
        self.calls.append("reset peaks")

    def environment(self) -> dict:
        return {"fake": "yes"}

    def allocate(self, nbytes: int) -> object:
        self.calls.append(f"allocate {nbytes}")
        raise MemoryError("out of memory")


@pytest.fixture
def acme_root(tmp_path, monkeypatch):
    """A code root holding a vendor's worker plugin, and the environment a launcher would set."""
    plugin = tmp_path / "vendors/acme/plugin.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(PLUGIN)
    monkeypatch.setattr(plugins, "code_root", lambda: str(tmp_path))
    monkeypatch.setenv("ACME_PLUGIN_SETUP", "")
    for name, value in {"FAKE_RANK": "3", "FAKE_WORLD": "4", "FAKE_LOCAL": "0", "ACME_VISIBLE_DEVICES": "2,3"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FAKE_NODE", raising=False)
    return tmp_path


def acme(**overrides) -> WorkerConfig:
    return config(**{"kind": "acme", "torch_device": "acme", "visible_devices_env": "ACME_VISIBLE_DEVICES",
                     "worker_plugin": "vendors/acme/plugin.py", **overrides})


def test_plugin_loader_calls_setup_and_reads_environment(tmp_path):
    write = tmp_path / "vendors/acme/hooks.py"
    write.parent.mkdir(parents=True)
    write.write_text(PLUGIN)
    device = DeviceSpec(kind="acme", worker_plugin="vendors/acme/hooks.py")
    plugin = plugins.load(device, root=str(tmp_path))
    plugin.setup(device)
    assert plugin.module.seen == ["acme"]
    assert plugin.environment() == {"acme_firmware": "1.2.3"}
    assert plugins.load(DeviceSpec(kind="cpu")) is None
    assert plugins.code_root() == str(ROOT)


def test_plugin_hooks_are_optional_and_checked(tmp_path):
    (tmp_path / "bare.py").write_text("")
    (tmp_path / "bad.py").write_text("def environment():\n    return ['not', 'a', 'dict']\n")
    bare = plugins.load(DeviceSpec(kind="x", worker_plugin="bare.py"), root=str(tmp_path))
    bare.setup(DeviceSpec(kind="x"))  # no setup hook: nothing to do
    assert bare.environment() == {}
    with pytest.raises(TypeError, match="not a dict"):
        plugins.load(DeviceSpec(kind="x", worker_plugin="bad.py"), root=str(tmp_path)).environment()
    with pytest.raises(FileNotFoundError, match="vendors/gone/plugin.py"):
        plugins.load(DeviceSpec(kind="x", worker_plugin="vendors/gone/plugin.py"), root=str(tmp_path))


def test_ranks_come_from_the_launchers_variables_and_node_rank_falls_back():
    env = {"FAKE_RANK": "5", "FAKE_WORLD": "8", "FAKE_LOCAL": "1", ENV_NODE_RANK: "2"}
    assert harness.read_ranks(LAUNCHER, env) == harness.Ranks(5, 8, 1, 2)
    assert harness.read_ranks(LAUNCHER, {**env, "FAKE_NODE": "1"}).node_rank == 1
    assert harness.read_ranks(LAUNCHER, {}) == harness.Ranks(0, 1, 0, 0)


def test_harness_records_on_an_accelerator(acme_root, capsys):
    harness.run(acme(), train_task.over(FakeWorker), LAUNCHER)
    worker = FakeWorker.last
    start, *steps, breakdown, end = records(capsys.readouterr().out)
    assert breakdown.steps == 0 and breakdown.not_measured.startswith("not measured for ")  # no phases offered
    assert worker.plugin_ran_first  # the plugin's setup ran before the framework touched the device
    assert (start.rank, start.world_size, start.local_rank, start.node_rank) == (3, 4, 0, 0)
    assert start.tokens_per_step == 2 * 16 // 2  # micro-batch x seq_len, shared by the 2 model-parallel ranks
    assert start.samples_per_step == 2 / 2  # the micro-batch's sequences, shared alike
    env = start.environment
    assert env["fake"] == "yes" and env["accelerator_kind"] == "acme" and env["acme_firmware"] == "1.2.3"
    assert env["visible_devices"] == {"ACME_VISIBLE_DEVICES": "2,3"}
    assert "hostname" in env
    assert [s.warmup for s in steps] == [True, False, False]
    assert {(s.tokens, s.effective_tokens, s.flops, s.loss, s.grad_norm) for s in steps} == {(32, 16.5, 5e5, 2.5, None)}
    step = ["sync", "step", "sync", "after"]  # the clock runs between synchronisations
    assert worker.calls == step + ["reset peaks"] + step * 2  # peaks of the measured steps only
    assert (end.peak_memory_bytes, end.peak_memory_reserved_bytes, end.memory_total_bytes, end.memory_kind) == (
        10, 20, 30, "allocated")


def test_harness_on_a_cpu_neither_synchronises_nor_asks_the_allocator(acme_root, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_LOCAL", "1")
    monkeypatch.setattr(FakeWorker, "on_cpu", True)
    harness.run(acme(visible_devices_env=None), train_task.over(FakeWorker), LAUNCHER)
    start, *_, end = records(capsys.readouterr().out)
    assert start.environment is None  # only local rank 0 reports the node
    assert "sync" not in FakeWorker.last.calls
    assert end.memory_kind == "rss" and end.peak_memory_reserved_bytes is None and end.peak_memory_bytes > 2**20


def test_oom_injection_asks_the_framework_for_a_pebibyte(acme_root, capsys):
    with pytest.raises(MemoryError):
        harness.run(acme(debug=DebugSpec(oom_at_step=1, fail_rank=3)), train_task.over(FakeWorker), LAUNCHER)
    assert FakeWorker.last.calls[-1] == f"allocate {OOM_REQUEST_BYTES}"
    assert FakeWorker.last.calls.count("step") == 1


def test_an_unsupported_case_carries_the_rank_that_found_out(acme_root):
    def refuse(cfg, ranks):
        raise UnsupportedOnDevice("no such thing here")

    with pytest.raises(UnsupportedOnDevice) as info:
        harness.run(acme(), train_task.over(refuse), LAUNCHER)
    assert info.value.rank == 3


def run_worker(tmp_path: Path, cfg: WorkerConfig, *, script: bool = False, env: dict | None = None):
    path = tmp_path / "worker.json"
    path.write_text(cfg.model_dump_json())
    entry = [str(ROOT / "training/run_pretraining.py")] if script else ["-m", WORKER_MODULE]
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK")}
    return subprocess.run([sys.executable, *entry, "--config", str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**clean, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.parametrize("framework, settings, reason", [
    ("torch", {"precision": "fp8"}, "fp8 training needs an accelerator of compute capability 8.9+; this run is on cpu"),
    ("torch", {"kind": "acme", "torch_device": "npu"}, "this torch build"),
    ("paddle", {"kind": "acme", "torch_device": "npu", "paddle_device": "npu"}, "this Paddle build"),
])
def test_unsupported_emits_a_record_and_exits_3(tmp_path, framework, settings, reason):
    done = run_worker(tmp_path, config(framework, **settings), script=framework == "paddle")
    assert done.returncode == EXIT_UNSUPPORTED, done.stderr
    (record,) = records(done.stdout)
    assert isinstance(record, perflog.UnsupportedRecord) and record.rank == 0
    assert reason in record.reason
    assert f"accelbench: not supported on this device: {record.reason}" in done.stderr


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_a_cpu_run_reports_its_kind_visible_devices_and_peak_rss(tmp_path, framework):
    cfg = config(framework, visible_devices_env="ACME_VISIBLE_DEVICES")
    done = run_worker(tmp_path, cfg, script=framework == "paddle", env={"ACME_VISIBLE_DEVICES": "0,1"})
    assert done.returncode == 0, done.stderr
    start, *steps, breakdown, end = records(done.stdout)
    # one process: the breakdown steps ran, with no collective
    assert breakdown.steps == 3 and breakdown.bucket_bytes == [] and breakdown.not_measured is None
    # the fastest step's communication: load only adds time
    assert all(c > 0 for c in breakdown.compute_s) and min(breakdown.communication_s) < 0.01
    assert start.framework == framework and start.device == "cpu"
    assert start.environment["accelerator_kind"] == "cpu"
    assert start.environment["visible_devices"] == {"ACME_VISIBLE_DEVICES": "0,1"}
    assert [s.tokens for s in steps] == [2 * 16] * 3
    assert end.memory_kind == "rss" and end.peak_memory_reserved_bytes is None
    assert end.memory_total_bytes == start.environment["memory_total_bytes"]


def test_paddle_workers_import_without_torch():
    code = "import sys; sys.modules['torch'] = None; import training.paddle.data, training.paddle.train"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def test_no_device_type_is_spelled_out_in_the_workload():
    """Devices come from the kind's DeviceSpec, never from a name written into training/."""
    spelled = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "training").rglob("*.py")
               for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"""["']cuda["']""", line)]
    assert spelled == []


def test_a_cpu_peak_is_reset_at_the_first_measured_step():
    """A warm-up that touched 300 MiB more than the steady state leaves no trace in the measured peak."""
    class CpuWorker:
        on_cpu = True

    warm_up = b"x" * (300 * 2**20)  # resident: every page written
    del warm_up
    before = harness.peak_rss()
    harness.reset_peak_memory(CpuWorker())
    after = harness.peak_rss()
    assert before - after > 250 * 2**20


def test_the_collector_is_off_through_the_warm_up_and_on_with_the_start_frozen_from_the_first_measured_step(
        acme_root, capsys):
    """The worker's entry switches the cyclic collector off (training/collector.py: 0.6-0.7 s of a small
    worker's CPU); the harness collects the warm-up's garbage once, freezes the rest and switches it on before
    the clock of the first measured step. Importing the entry, as the test workers do, leaves a process's
    collector alone."""
    import gc

    from training import run_pretraining

    assert gc.isenabled() and run_pretraining.__name__ != "__main__"
    seen = []

    class Watched(FakeWorker):
        def train_step(self) -> harness.StepWork:
            seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
            return super().train_step()

    gc.disable()
    try:
        harness.run(acme(), train_task.over(Watched), LAUNCHER)
        assert seen == [(False, False), (True, True), (True, True)]  # one warm-up step, two measured
    finally:
        gc.unfreeze()
        gc.enable()

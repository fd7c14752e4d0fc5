"""The Paddle worker's accelerator-only paths, checked in-process on a CPU.

No GPU has ever been available here: where Paddle refuses a CPU place
(``group_sharded_parallel``) or a CPU build lacks the switch (the TF32 flags),
a stand-in takes its place, and each test says so. Where the API can be read,
the installed Paddle source is read instead.
"""
from __future__ import annotations

import ast
from pathlib import Path

import paddle  # dev setup installs it: a paddle that fails to import fails these tests, never skips them
import pytest

from training import harness

from .test_plan import build

CASE = "gpt3_tiny"


def _spec(root, tmp_path, name: str, *settings: str):
    (case,) = build(root, tmp_path, name, assignments=settings).cases
    return case.rounds[0].worker_config


@pytest.mark.parametrize("sharding, level", [("stage2", "os_g"), ("stage3", "p_g_os")])
def test_group_sharding_gets_the_fp16_scaler_and_the_worker_keeps_the_one_it_returns(
        root, tmp_path, monkeypatch, sharding, level):
    """``group_sharded_parallel`` is a monkeypatched stand-in: acceptable only because no GPU exists here
    (the real one asserts a GPU/XPU/custom place, and a CPU run of this layout is ``unsupported``). Without
    its scaler, stage 3's gradient slices are never unscaled nor checked for inf."""
    import paddle.distributed.sharding as sharding_module

    from training.paddle import hybrid
    from training.paddle.precision import Precision
    from training.paddle.train import Layout

    spec = _spec(root, tmp_path, f"{CASE}:paddle:cpu:1:2", "train.precision=fp16",
                 f"parallel.sharding={sharding}").workload
    layout = Layout(spec, world=2)
    calls, returned, group = [], object(), object()

    def stand_in(model, optimizer, level, scaler=None, group=None, offload=False, **rest):
        calls.append({"level": level, "scaler": scaler, "group": group, "offload": offload})
        return model, optimizer, returned

    class Hcg:
        def get_sharding_parallel_group(self):
            return group

    monkeypatch.setattr(sharding_module, "group_sharded_parallel", stand_in)
    model = paddle.nn.Linear(4, 4)
    precision = Precision(spec)
    model, optimizer = precision.decorate(model, paddle.optimizer.AdamW(parameters=model.parameters()))
    given = precision.scaler
    assert isinstance(given, paddle.amp.GradScaler)
    assert hybrid.wrap(model, optimizer, precision, spec, layout, Hcg()) == (model, optimizer)
    assert calls == [{"level": level, "scaler": given, "group": group, "offload": False}]
    assert precision.scaler is returned  # the GroupShardedScaler is what train_step steps with


def _tf32_build(monkeypatch) -> dict:
    """Stand-in for a CUDA build's flags (this CPU build defines no TF32 flags): TF32 on, Paddle's default."""
    from training.paddle.precision import TF32_FLAGS

    flags = dict.fromkeys(TF32_FLAGS, True)

    def get_flags(names):
        names = [names] if isinstance(names, str) else names
        for name in names:
            if name not in flags:
                raise ValueError(f"Flag {name} cannot get its value through this function.")
        return {name: flags[name] for name in names}

    monkeypatch.setattr(paddle, "get_flags", get_flags)
    monkeypatch.setattr(paddle, "set_flags", flags.update)
    return flags


def test_an_fp32_run_turns_tf32_off_and_reports_ieee_matmuls(monkeypatch):
    from training.paddle.precision import TF32_FLAGS, set_fp32_matmul

    _tf32_build(monkeypatch)
    assert set_fp32_matmul("bf16", on_cpu=False) == "tf32"  # AMP runs keep Paddle's default
    assert paddle.get_flags(list(TF32_FLAGS)) == dict.fromkeys(TF32_FLAGS, True)
    assert set_fp32_matmul("fp32", on_cpu=False) == "ieee"
    assert paddle.get_flags(list(TF32_FLAGS)) == dict.fromkeys(TF32_FLAGS, False)


def test_the_paddle_worker_reports_its_fp32_matmul_math(root, tmp_path, monkeypatch):
    """A real worker on this CPU build (no TF32 flags: nothing to set, IEEE matmuls), then on the stand-in
    flags of a CUDA build, where an fp32 run must leave them False."""
    from training.paddle.precision import TF32_FLAGS
    from training.paddle.train import PaddleWorker

    cfg = _spec(root, tmp_path, f"{CASE}:paddle:cpu:1:1")
    ranks = harness.Ranks(rank=0, world_size=1, local_rank=0, node_rank=0)
    assert PaddleWorker(cfg, ranks).environment()["fp32_matmul"] == "ieee"
    flags = _tf32_build(monkeypatch)
    worker = PaddleWorker(cfg, ranks)
    assert flags == dict.fromkeys(TF32_FLAGS, False)
    assert harness.node_facts(cfg.runtime.device, worker, None)["fp32_matmul"] == "ieee"


def test_peak_memory_reset_uses_names_every_paddle_accelerator_build_exports(monkeypatch):
    """Read from the installed source: ``paddle.device`` takes its memory functions from the cuda, xpu or
    custom_device module, whichever the build has (a CPU build's raise), so the worker's names must be
    among what each of those imports; then the worker calls exactly those."""
    from training.paddle import device as devices

    names = {"max_memory_allocated", "max_memory_reserved", "reset_max_memory_allocated",
             "reset_max_memory_reserved"}
    source = Path(paddle.device.__file__).read_text()
    imported = {node.module: {alias.name for alias in node.names} for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.level == 1}
    for backend in ("cuda", "xpu", "custom_device", "cpu"):
        assert names <= imported[backend], backend
    with pytest.raises(ValueError, match="not supported in CPU"):  # hence the harness never calls it on a CPU
        paddle.device.reset_max_memory_allocated()
    called = []
    for name in names:
        monkeypatch.setattr(paddle.device, name, lambda name=name: called.append(name) or 0)
    devices.reset_peak_memory()
    assert sorted(called) == ["reset_max_memory_allocated", "reset_max_memory_reserved"]


def test_multi_process_paddle_layouts_say_where_their_collectives_run():
    """The time breakdown across Paddle processes: not measured where no Python wrapper can time Paddle's
    collectives, and the reason names the layout and the place; plain data parallel, tensor parallel alone on a
    CPU and sharding stage1 are measured (no reason)."""
    from types import SimpleNamespace

    from training.paddle.breakdown import uncovered

    def layout(pp=1, tp=1, sharding=1):
        return SimpleNamespace(pp=pp, tp=tp, sharding=sharding, dp=1)

    assert uncovered(layout(tp=2), "none", on_cpu=False).startswith(
        "not measured for tensor parallel on paddle on an accelerator: ParallelCrossEntropy's C++ kernel")
    assert uncovered(layout(tp=2), "none", on_cpu=True) is None
    assert uncovered(layout(pp=2, tp=2), "none").startswith("not measured for pipeline parallel on paddle")
    assert uncovered(layout(sharding=2), "stage3").startswith("not measured for sharding stage3 on paddle")
    assert uncovered(layout(sharding=2), "stage1") is None
    assert uncovered(layout(), "none") is None

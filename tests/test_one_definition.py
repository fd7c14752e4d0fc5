"""Each figure has one definition (issue 44): world size, global batch and tokens per step in the contract
(training/contract/batch.py), the TFLOP/s unit there too (flops.tflop_per_s), TFLOP/s per device, MFU and its
note in results/figures/derive.py, and the memory figure a view shows in results/figures/memory.py. Two ways to
hold that: the code that computed them elsewhere is gone (an AST scan of both halves for the arithmetic itself), and
every caller agrees with the definition on a table of layouts (plans, layout facts, estimates, the worker's
share, the sweep's row). In-process."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from run_benchmarks.catalog import casename
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.estimates import estimate
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.rounds import workload
from run_benchmarks.results.figures import derive, memory
from run_benchmarks.sweep.state import Row
from training.contract import batch, flops, perflog

from .conftest import ROOT

HALVES = ("run_benchmarks", "training")


def _names(node: ast.AST) -> set[str]:
    """Every attribute, name and string subscript an expression reads (``a.b * c["d"]`` -> a, b, c, d)."""
    out = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute):
            out.add(child.attr)
        elif isinstance(child, ast.Name):
            out.add(child.id)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            out.add(child.value)
    return out


@functools.lru_cache(maxsize=1)
def _arithmetic() -> tuple[tuple[str, ast.BinOp], ...]:
    """Every arithmetic node of both halves, with its module's path from the root (parsed once)."""
    return tuple((str(path.relative_to(ROOT)), node) for half in HALVES for path in (ROOT / half).rglob("*.py")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.BinOp))


def _where(test) -> set[str]:
    """The modules holding an arithmetic node for which ``test(node)`` is true."""
    return {path for path, node in _arithmetic() if test(node)}


def _product_of(*names: str):
    return lambda node: isinstance(node.op, ast.Mult) and set(names) <= _names(node)


def test_the_batch_and_world_size_are_multiplied_out_in_the_contract_only():
    assert _where(_product_of("micro_batch_size", "gradient_accumulation_steps")) == {"training/contract/batch.py"}
    assert _where(_product_of("update_timesteps", "experience_batch_size")) == {"training/contract/batch.py"}
    assert _where(_product_of("nnodes", "nprocs_per_node")) == {"training/contract/batch.py"}


def test_tflops_is_divided_out_once_and_mfu_divided_by_its_peak_once():
    def per_1e12(node: ast.BinOp) -> bool:
        return isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) and node.right.value == 1e12

    def over_a_peak(node: ast.BinOp) -> bool:  # TFLOP/s over a peak: an MFU
        return (isinstance(node.op, ast.Div) and any("tflops" in n for n in _names(node.left))
                and any("peak" in n or "measured" in n for n in _names(node.right)))

    assert _where(per_1e12) == {"training/contract/flops.py",
                                "run_benchmarks/results/importers/paddle_fields.py"}  # a unit: 2**40 FLOP in 1e12
    assert _where(over_a_peak) == {"run_benchmarks/results/figures/derive.py"}


LAYOUTS = [  # case name, --set settings
    ("gpt3_6.7B:torch:A100:1:8", ()),
    ("gpt3_6.7B:torch:A100:1:4", ("parallel.tensor_parallel_degree=2", "train.gradient_accumulation_steps=4",
                                  "parallel.sharding=stage2", "train.precision=bf16")),
    ("gpt3_6.7B:torch:A100:1:2", ("parallel.pipeline_parallel_degree=2", "train.gradient_accumulation_steps=4",
                                  "train.micro_batch_size=2")),
    ("gpt3_6.7B:paddle:A100:1:8", ("parallel.sharding=stage2", "train.micro_batch_size=3")),
    ("gpt2_tiny:torch:cpu:1:2", ()),
    ("ppo_tiny:torch:cpu:1:2", ()),
]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    inputs, logs = load_inputs(ROOT), tmp_path_factory.mktemp("logs")
    return [build_run_plan(inputs, [name], "one-definition", logs, None, sets).cases[0] for name, sets in LAYOUTS]


def test_every_reader_of_a_layout_agrees_with_the_contract(plans):
    estimated = 0
    for case in plans:
        w, world = case.workload, case.name.world_size
        assert world == batch.world_size(case.name.nnodes, case.name.nprocs_per_node) == \
            casename.parse(str(case.name)).world_size
        facts = workload.layout_facts(case.name, w)
        assert (facts["world_size"], facts["global_batch_samples"], facts["global_batch_tokens"]) == \
            (world, batch.global_batch(w, world), batch.tokens_per_step(w, world))
        # the worker's share per rank (ranks of one replica share it), summed over every rank: the global batch
        share = w.parallel.tensor_parallel_degree * w.parallel.pipeline_parallel_degree
        per_rank = perflog.share_of(batch.replica_batch(w), share)
        assert per_rank * world == batch.global_batch(w, world), case.name
        if w.task == "pretrain" and case.hardware.peak_tflops(w.train.precision)[0]:
            (said,) = [n for n in estimate(case).notes if n.startswith("round time")]
            assert f"x {batch.tokens_per_step(w, world):,} tokens /" in said, said
            estimated += 1
    assert estimated == 4  # every A100 layout: the dry run's estimate read the same tokens per step


def test_the_ppo_batch_is_what_an_update_makes_and_learns_from_on_every_rank(plans):
    ppo_case = plans[-1]
    w = ppo_case.workload
    assert batch.replica_batch(w) == w.ppo.update_timesteps * w.ppo.experience_batch_size
    assert batch.tokens_per_step(w, 2) == 2 * batch.replica_batch(w) * (w.ppo.prompt_length
                                                                         + w.ppo.generation_length)


def test_tflops_and_mfu_and_their_notes_come_from_one_place():
    assert flops.tflop_per_s(3e12, 2.0, 3) == 0.5
    assert derive.tflops_per_device(6e9, 1000.0) == derive.tflops_of_steps(6e12, 1.0, 1) == 6.0
    used = derive.utilisation(6.0, 12.0, "bf16", "datasheet")
    assert (used.mfu, used.note) == (0.5, "MFU = 6 / 12 TFLOP/s (bf16 peak); datasheet")
    measured = derive.measured_utilisation(6.0, 8.0, "GEMM calibrated")
    assert (measured.mfu, measured.note) == (0.75, "MFU (measured) = 6 / 8 TFLOP/s (GEMM calibrated)")
    assert derive.measured_utilisation(6.0, None, "run accelbench calibrate") == \
        derive.Utilisation(None, "run accelbench calibrate")
    part = derive.part_utilisation("learning.tflops_per_device", 3.0, 12.0, "datasheet")
    assert (part.mfu, part.note) == (0.25, "learning.tflops_per_device / 12 TFLOP/s (datasheet)")


def test_a_sweep_row_shows_the_memory_figure_every_view_shows():
    """A round with the monitor's device-in-use reading and the worker's allocator peak: the sweep's row shows
    what report and show show (device in use first), named; without the monitor's, the worker's own."""
    doc = {"case_name": "gpt2_tiny:torch:X1:1:1", "status": "ok", "case": {"world_size": 1},
           "workload": {"train": {"micro_batch_size": 2}},
           "metrics": {"peak_memory_bytes": {"max": 3 * 2**30}, "memory_kind": "allocated",
                       "peak_memory_reserved_bytes": {"max": 4 * 2**30}},
           "monitor": {"device_memory_used_bytes": 5 * 2**30}}
    for monitor, value, name in (({"device_memory_used_bytes": 5 * 2**30}, 5 * 2**30, "device in use"),
                                 ({}, 4 * 2**30, "reserved")):
        row = Row.from_document(1, {}, {**doc, "monitor": monitor}, "h")
        shown = memory.headline({**{k: (v or {}).get("max") for k, v in doc["metrics"].items()
                                    if k.endswith("_bytes")}, **monitor}.get, "allocated")
        assert (row.peak_memory_bytes, row.memory_kind) == (shown.value, shown.name) == (value, name)


def test_ppo_reports_its_peak_memory_in_the_end_record_as_every_task_does():
    from types import SimpleNamespace

    from training.contract.flops import PhaseFlops
    from training.contract.ppo import PPOSpec
    from training.ppo_task import phase_figures

    phase = {name: PhaseFlops(matmul=9e8, attention=1e8, reference=9e8) for name in ("generation", "forwards",
                                                                                      "learning")}
    worker = SimpleNamespace(ppo=PPOSpec(), phase=phase, ranks=SimpleNamespace(rank=0), on_cpu=True)
    names = [f.name for f in phase_figures(worker, {"experience": 1.0, "learning": 1.0, "iteration": 2.0}, 8)]
    assert names and not [n for n in names if "memory" in n]
    assert Path(ROOT / "training/ppo_task.py").read_text().count("harness.peak_memory(") == 1

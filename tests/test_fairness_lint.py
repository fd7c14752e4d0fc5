"""Fairness lint (catalog/fairness.py, results/checks/fairness.py, results/figures/impossible.py): each with a vendor
file (or a vendor's operations, or a vendor's figures) made to trip it. Sparse peaks against a calibrated GEMM,
devices that are two dies, constant micro-benchmark inputs, padding counted as effective tokens. In-process: the
CLI fixture, torch on the CPU for the micro-benchmark operations."""
from __future__ import annotations

import pytest
import yaml

from run_benchmarks.catalog import fairness, measured_peaks
from run_benchmarks.execute.outcome import result_document
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.results.checks import fairness as fairness_checks
from run_benchmarks.results.figures import impossible as figure_checks
from run_benchmarks.results.rounds.result import RoundResult
from training.contract.micro import MicroSpec

from .conftest import ROOT
from .test_policy_views import judged
from .test_results import fill

torch = pytest.importorskip("torch")

from training.micro import gemm, membw  # noqa: E402
from training.micro.torch_ops import TorchOps, gemm_operands, random_tensor  # noqa: E402

CPU = torch.device("cpu")


def calibrated(root, tflops: float) -> None:
    (root / "vendors/nvidia/measured_peaks.yaml").write_text(yaml.safe_dump({"accelerators": {"H100": {"bf16": {
        "tflops": tflops, "shape": [8192, 8192, 8192], "measured_at": "2026-11-20T10:00:00+00:00", "host": "gpu1",
        "command": "accelbench calibrate H100 --dtype bf16"}}}}))


def test_a_peak_far_above_the_calibrated_gemm_is_questioned_as_sparse(accelbench, root):
    calibrated(root, 760.0)  # a dense bf16 GEMM on an H100 reaches about 3/4 of the dense 989.5
    measured = measured_peaks.load(root / "vendors/nvidia").accelerators["H100"]
    assert fairness.sparse_peaks("H100", {"bf16": 989.5}, measured) == []  # the dense figure passes
    vendor = root / "vendors/nvidia/vendor.yaml"  # the datasheet's "with sparsity" figure copied in
    vendor.write_text(vendor.read_text().replace("fp16: 989.5, bf16: 989.5, fp8: 1979}",
                                                 "fp16: 989.5, bf16: 1979, fp8: 1979}", 1))
    tripped = accelbench("vendor", "check", "nvidia", "--root", str(root)).stdout
    assert "accelerators.H100.peak_tflops.bf16 1979 is 2.6x the 760 TFLOP/s its GEMM reached" in tripped
    assert "is it a sparse (2:4) datasheet figure? Peaks are dense" in tripped


def test_a_device_must_say_how_many_dies_it_is_and_reports_say_it(accelbench, root, tmp_path):
    vendor = root / "vendors/amd/vendor.yaml"
    vendor.write_text(vendor.read_text().replace("    dies_per_device: 1\n    devices_per_card: 2\n", "", 1))
    tripped = accelbench("vendor", "check", "amd", "--root", str(root))
    assert tripped.returncode == 1 and "accelerators.MI250X.dies_per_device is not set" in tripped.stdout
    assert "MI300X.dies_per_device" not in tripped.stdout and "cpu" not in tripped.stdout.split("vendor amd")[0]
    # a round on the shipped file records what a device is, and show and report say it
    case = build_run_plan(load_inputs(ROOT), ["gpt3_6.7B:torch:MI250X:1:8"], "d", tmp_path / "logs").cases[0]
    record = result_document(case, RoundResult(str(case.name), 1, tmp_path, "failed"), {})
    assert record.device_definition.words() == "a device of MI250X is 1 die; a card is 2 devices " \
                                               "(vendors/amd/vendor.yaml)"
    doc = {**judged("run-d"), "device_definition": record.device_definition.model_dump()}
    db = tmp_path / "results.db"
    fill(db, [doc])
    assert "device: a device of MI250X is 1 die; a card is 2 devices" in accelbench("show", "run-d", "--db",
                                                                                   str(db)).stdout
    report = accelbench("report", "run-d", "--db", str(db)).stdout
    assert "per device: a device of MI250X is 1 die; a card is 2 devices" in report


def test_micro_benchmark_operands_are_random_from_a_stated_seed():
    a, b = gemm_operands(64, 32, 16, "fp32", CPU, 7)
    again, _ = gemm_operands(64, 32, 16, "fp32", CPU, 7)
    other, _ = gemm_operands(64, 32, 16, "fp32", CPU, 8)
    assert torch.equal(a, again) and not torch.equal(a, other) and a.std() > 0.5 and not torch.equal(a[:16], b[:16].t())
    assert len(torch.unique(random_tensor((4096,), 1, CPU))) == 4096
    ops = TorchOps(CPU)
    figures = [*gemm.run(MicroSpec(bench="gemm", shapes=((32, 32, 32),), warmup=0, iters=1, seed=5), ops, 0),
               *membw.run(MicroSpec(bench="membw", sizes_bytes=(1 << 12,), warmup=0, iters=1, seed=5), ops, 0)]
    sized = [f for f in figures if "m" in f.params or "bytes" in f.params]
    assert sized and all((f.params["inputs"], f.params["seed"]) == ("normal", 5) for f in sized)
    assert fairness_checks.micro_inputs([{"name": f.name, "params": f.params} for f in figures]) == []


class ConstantOps(TorchOps):
    """A vendor's operations that fill the GEMM's operands with ones (they run faster on some hardware)."""

    def gemm(self, m, n, k, dtype, seed):
        a, b = torch.ones(m, k), torch.ones(k, n)
        call = lambda: torch.matmul(a, b)  # noqa: E731
        call.operands = (a, b)
        return call


class SilentOps(TorchOps):
    """... and one that does not hand its operands over at all."""

    def gemm(self, m, n, k, dtype, seed):
        a = torch.zeros(m, k)
        return lambda: a @ torch.zeros(k, n)


@pytest.mark.parametrize("ops,said", [(ConstantOps(CPU), "constant"), (SilentOps(CPU), "unstated")])
def test_constant_or_unstated_gemm_inputs_are_named_and_flagged(ops, said):
    figures = list(gemm.run(MicroSpec(bench="gemm", shapes=((16, 16, 16),), warmup=0, iters=1), ops, 0))
    assert {f.params["inputs"] for f in figures if "m" in f.params} == {said}
    (warning,) = fairness_checks.micro_inputs([{"name": f.name, "params": f.params} for f in figures])
    assert warning.startswith(f"micro-benchmark figures gemm.tflops, gemm.time_s (inputs {said}) do not state their "
                              "operands random with a seed")


def test_padding_is_never_counted_as_effective_tokens():
    # a vendor's worker that counted padding: more effective tokens than tokens cannot be, the round fails
    counted = {"tokens_per_s_per_device": 1000.0, "effective_tokens_per_s_per_device": 1250.0}
    (problem,) = figure_checks.impossible(counted)
    assert problem.startswith("effective tokens/s/device 1,250 is over tokens/s/device 1,000")
    # equal over every step of padded batches of 4: questioned; batches of one sample pad nothing: not
    same = {"tokens_per_s_per_device": 1000.0, "effective_tokens_per_s_per_device": 1000.0}
    (warning,) = fairness_checks.token_accounting(same, True, 4)
    assert "is padding counted as effective tokens?" in warning
    assert fairness_checks.token_accounting(same, True, 1) == [] and fairness_checks.token_accounting(same, False, 4) == []
    assert fairness_checks.token_accounting({**same, "effective_tokens_per_s_per_device": 700.0}, True, 4) == []

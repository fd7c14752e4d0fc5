"""Micro-benchmarks (training/micro) and measured peaks (accelbench calibrate): real torch, real torchrun with
gloo, the real CLI. The formulas are written out here again, not imported, so a wrong one cannot pass itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from training.contract import perflog
from training.contract.names import EXIT_UNSUPPORTED

from .conftest import ROOT
from .runner import ends_with_the_test

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from training.micro.torch_ops import make_gemm  # noqa: E402
from training.contract.micro import MicroSpec  # noqa: E402

SHORT = ("--set", "train.steps=8", "--set", "train.warmup_steps=2")


def run_micro(spec: dict, nprocs: int = 1, tmp_path=None) -> list[perflog.FigureRecord]:
    """The worker's micro-benchmark as a case runs it: one process, or ``nprocs`` under torchrun."""
    argv = ["-m", "training.micro", "--spec", json.dumps(spec)]
    if nprocs > 1:
        argv = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nprocs}", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if tmp_path is not None:
        env["TMPDIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
                          preexec_fn=ends_with_the_test())
    assert done.returncode == 0, done.stderr[-3000:]
    return [r for r in map(perflog.parse_line, done.stdout.splitlines()) if isinstance(r, perflog.FigureRecord)]


def by_key(records, name):
    return {json.dumps(r.params, sort_keys=True): r for r in records if r.name == name}


@pytest.mark.parametrize("m,n,k", [(64, 32, 16), (128, 96, 48), (256, 256, 256), (3, 5, 7)])
def test_gemm_flops_are_exactly_2mnk(m, n, k):
    gemm = make_gemm(m, n, k, "fp32", torch.device("cpu"))
    with FlopCounterMode(display=False) as counter:
        gemm()
    assert counter.get_total_flops() == 2 * m * n * k


def test_gemm_figures_follow_from_time_and_shape(tmp_path):
    shapes = [[64, 64, 64], [128, 64, 32]]
    records = run_micro({"bench": "gemm", "shapes": shapes, "warmup": 1, "iters": 3}, tmp_path=tmp_path)
    times, tflops = by_key(records, "gemm.time_s"), by_key(records, "gemm.tflops")
    assert sorted(times) == sorted(tflops) and len(times) == len(shapes)
    for key, t in times.items():
        p = t.params
        assert tflops[key].value == 2 * p["m"] * p["n"] * p["k"] / t.value / 1e12
        assert tflops[key].unit == "TFLOP/s" and "2*M*N*K" in tflops[key].formula
    (best,) = [r for r in records if r.name == "gemm.best_tflops"]
    assert best.value == max(r.value for r in tflops.values()) and best.params == {"dtype": "fp32"}


def test_gemm_dtype_a_cpu_lacks_is_unsupported_not_wrong(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    spec = json.dumps({"bench": "gemm", "dtypes": ["tf32"], "shapes": [[8, 8, 8]]})
    done = subprocess.run([sys.executable, "-m", "training.micro", "--spec", spec], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_UNSUPPORTED and "Traceback" not in done.stderr
    (record,) = [r for r in map(perflog.parse_line, done.stdout.splitlines()) if r is not None]
    assert isinstance(record, perflog.UnsupportedRecord) and "tf32 is a tensor-core mode of torch's CUDA backend" in record.reason


def test_stream_figures_count_bytes_as_stream_does(tmp_path):
    nbytes = 4 << 20
    records = run_micro({"bench": "membw", "sizes_bytes": [nbytes], "warmup": 1, "iters": 3}, tmp_path=tmp_path)
    for kernel, arrays in (("copy", 2), ("triad", 3)):
        (t,) = [r for r in records if r.name == f"membw.{kernel}_time_s"]
        (bw,) = [r for r in records if r.name == f"membw.{kernel}_gbps"]
        assert bw.params == {"bytes": nbytes, "dtype": "fp32", "inputs": "normal", "seed": 1234} and bw.unit == "GB/s"
        assert bw.value == arrays * nbytes / t.value / 1e9


# nccl-tests, doc/PERFORMANCE.md, written out independently of training/micro/formulas.py
BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
              "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n, "broadcast": lambda n: 1,
              "reduce": lambda n: 1,  # reduce to one root: busBw = algBw (nccl-tests' src/reduce.cu)
              "sendrecv": lambda n: 1}  # to rank+1, from rank-1: busBw = algBw (nccl-tests' src/sendrecv.cu)


COLLECTIVE_SIZES = [1 << 10, 1 << 16]


WORLDS = (4, 2)  # one launch of the first; its ranks 0-1 then regroup for the second (tests/micro_ops_worker.py)


@pytest.fixture(scope="module")
def collectives(tmp_path_factory):
    """Every op's records by world size, from one torchrun launch of 4 ranks (tests/micro_ops_worker.py: the
    worker's own ``figures`` for each op in turn, in one gloo group of the 4, then again in a gloo group of
    ranks 0 and 1: a second launch of 2 ranks cost a torchrun and two ranks' imports, ~11 s of CPU)."""
    specs = [json.dumps({"bench": "collective", "op": op, "sizes_bytes": COLLECTIVE_SIZES, "warmup": 1,
                         "iters": 2}) for op in sorted(BUS_FACTOR)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "TMPDIR": str(tmp_path_factory.mktemp("collectives"))}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc_per_node={WORLDS[0]}", "-m", "tests.micro_ops_worker", "--then-on",
                           str(WORLDS[1]), *specs], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=ends_with_the_test())
    assert done.returncode == 0, done.stderr[-3000:]
    out = {nprocs: [] for nprocs in WORLDS}
    for line in done.stdout.splitlines():
        world, _, rest = line.partition(" ")
        record = perflog.parse_line(rest) if world.startswith("world=") else None
        if isinstance(record, perflog.FigureRecord):
            out[int(world.removeprefix("world="))].append(record)
    return out


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("op", sorted(BUS_FACTOR))
def test_collective_bandwidth_follows_nccl_tests(collectives, op, nprocs):
    records = [r for r in collectives[nprocs] if r.params.get("op") == op]
    assert {r.rank for r in records} == set(range(nprocs))
    for size in COLLECTIVE_SIZES:
        point = [r for r in records if r.params["bytes"] == size]
        assert len(point) == 3 * nprocs  # time, algbw, busbw from every rank
        for rank in range(nprocs):
            mine = {r.name: r for r in point if r.rank == rank}
            t = mine[f"{op}.time_s"]
            assert t.params == {"op": op, "bytes": size, "dtype": "fp32", "ranks": nprocs, "inputs": "normal",
                                "seed": 1234} and t.reduce == "max"
            algbw = mine[f"{op}.algbw_gbps"].value
            assert algbw == size / t.value / 1e9
            assert mine[f"{op}.busbw_gbps"].value == pytest.approx(algbw * BUS_FACTOR[op](nprocs), rel=1e-12)
        # the slowest rank's time is the operation's: every rank reports the same one
        assert len({r.value for r in point if r.name == f"{op}.time_s"}) == 1


def test_collective_needs_an_op():
    with pytest.raises(ValueError, match="bench collective needs op"):
        MicroSpec(bench="collective")


def test_calibrate_then_run_shows_mfu_against_the_measured_peak(cli, root, tmp_path):
    done = cli("calibrate", "cpu", "--root", str(root), "--iters", "2")
    assert done.returncode == 0, done.stderr
    peaks = yaml.safe_load((root / "vendors" / "cpu" / "measured_peaks.yaml").read_text())
    fp32 = peaks["accelerators"]["cpu"]["fp32"]
    assert fp32["tflops"] > 0 and len(fp32["shape"]) == 3 and fp32["command"] == "accelbench calibrate cpu --dtype fp32"

    result = cli("run", "gpt2_tiny:torch:cpu:1:1", "--root", str(root), *SHORT)
    assert result.returncode == 0, result.stderr
    (doc,) = result.results()
    m = doc["metrics"]
    assert m["measured_peak_tflops"] == fp32["tflops"]
    assert m["mfu_measured"] == m["tflops_per_device"] / fp32["tflops"]
    assert m["mfu"] is None  # the CPU has no datasheet peak: that MFU stays n/a, named as such
    assert "MFU (measured)" in result.stdout and f"{m['mfu_measured']:.1%}" in result.stdout
    assert "fp32 GEMM peak measured by accelbench calibrate" in result.stdout
    assert "MFU n/a: no fp32 peak for cpu" in result.stdout
    (row,) = result.attempts()  # the store keeps both denominators with the round
    assert row["metrics"]["mfu_measured"] == m["mfu_measured"] and row["mfu"] is None


def test_calibrate_unknown_hardware_is_a_clear_error(accelbench, root):
    done = accelbench("calibrate", "H1000", "--root", str(root))
    assert done.returncode == 2 and "unknown hardware 'H1000'" in done.stderr and "Traceback" not in done.stderr

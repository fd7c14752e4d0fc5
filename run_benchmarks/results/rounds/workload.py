"""What a round ran, as data: the resolved workload, its hash, and the layout and batch facts.

Two rounds belong in one row of a report only when they ran the same thing. "The same thing" is the
resolved workload: the case, framework and version, hardware, nodes x processes, and every setting the
worker was handed (model, train, data, parallel, debug) after the case, extern config, test_conf and
``--set`` layers were applied. Its hash groups rounds in reports, compares and reference checks, and
tells a sweep which points are done. Names of files (the extern config's) are deliberately not part of
it: two vendors' identical layouts hash alike whatever their files are called, unless the hardware
differs, which is what a compare across vendors varies on purpose (``layout_key`` leaves it out).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from training.contract import batch
from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName

HASH_CHARS = 16  # 64 bits: no collision among any number of workloads a store will hold


def resolved_workload(name: CaseName, workload: WorkloadSpec) -> dict[str, Any]:
    """The round's workload as plain JSON data (no paths of this run, no round number, no repeat).

    Settings left at their defaults are left out, so adding a new setting with a default to the worker
    config does not change the hash of every workload already in a store."""
    return {
        "case": name.case,
        "framework": name.framework,
        "framework_version": name.framework_version,
        "hardware": name.hardware,
        "nnodes": name.nnodes,
        "nprocs_per_node": name.nprocs_per_node,
        "spec": workload.model_dump(mode="json", exclude_defaults=True),
    }


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def workload_hash(resolved: dict[str, Any]) -> str:
    """Equal for rounds that ran the same workload, different as soon as any setting differs."""
    return _digest(resolved)


def layout_key(resolved: dict[str, Any]) -> str:
    """The workload without its hardware: equal for two vendors' runs of the same case, framework, layout
    and settings, so ``compare hardware=A hardware=B`` pairs them."""
    return _digest({k: v for k, v in resolved.items() if k != "hardware"})


def layout_facts(name: CaseName, workload: WorkloadSpec) -> dict[str, Any]:
    """The columns a reader tells rows apart by: parallel degrees, sharding, batch and precision."""
    par, train = workload.parallel, workload.train
    world = name.world_size
    dp = par.data_degree(world)
    sharding_degree = (par.sharding_parallel_degree or dp) if par.sharding != "none" else 1
    return {
        "nnodes": name.nnodes,
        "nprocs_per_node": name.nprocs_per_node,
        "world_size": world,
        "data_parallel": dp,
        "tensor_parallel": par.tensor_parallel_degree,
        "pipeline_parallel": par.pipeline_parallel_degree,
        "sharding": par.sharding,
        "sharding_degree": sharding_degree,
        "sequence_parallel": par.sequence_parallel,
        "offload": par.offload,
        "micro_batch_size": train.micro_batch_size,
        "gradient_accumulation_steps": train.gradient_accumulation_steps,
        "global_batch_samples": batch.global_batch(workload, world),
        "global_batch_tokens": batch.tokens_per_step(workload, world),
        "seq_len": workload.model.seq_len,
        "precision": train.precision,
        "recompute": train.recompute,
        "data_source": workload.data.source,
        "task": workload.task,
    }

"""Is a parallel layout consistent with the case name and the model? Checked at plan time.

The rules hold for every framework: the degrees multiply to the world size,
tensor parallelism splits whole heads, sequence
parallelism whole positions, pipeline stages hold whole layers.
"""
from __future__ import annotations

from training.contract.spec import WorkloadSpec

from run_benchmarks.catalog.casename import CaseName


def layout_problems(workload: WorkloadSpec, name: CaseName) -> list[str]:
    par, model = workload.parallel, workload.model
    world = name.world_size
    tp, pp = par.tensor_parallel_degree, par.pipeline_parallel_degree
    dp = par.data_degree(world)
    problems = []
    if dp * tp * pp != world:
        problems.append(
            f"parallel degrees data {dp} x tensor {tp} x pipeline {pp} = {dp * tp * pp}, but case name "
            f"{str(name)!r} runs {name.nnodes} node(s) x {name.nprocs_per_node} process(es) = {world}")
    if model.n_head % tp or model.kv_heads % tp:
        problems.append(f"tensor_parallel_degree {tp} must divide the heads (n_head {model.n_head}, "
                        f"key/value heads {model.kv_heads})")
    if par.sequence_parallel and model.seq_len % tp:
        problems.append(f"sequence_parallel splits the sequence across the {tp} tensor-parallel ranks: "
                        f"seq_len {model.seq_len} must be a multiple of {tp}")
    stages = pp * par.stages_per_rank
    micro_batches = workload.train.gradient_accumulation_steps
    if stages > model.n_layer:
        problems.append(f"pipeline_parallel_degree {pp} x {par.stages_per_rank} stage(s) per rank = {stages} "
                        f"stages is more than the model's {model.n_layer} layers")
    if pp > 1 and par.pipeline_schedule == "1f1b" and micro_batches < pp:
        problems.append(f"pipeline schedule 1f1b needs at least as many micro-batches as stages: "
                        f"train.gradient_accumulation_steps {micro_batches} < pipeline_parallel_degree {pp}")
    if pp > 1 and par.pipeline_schedule == "interleaved" and micro_batches % pp:
        problems.append(f"pipeline schedule interleaved needs micro-batches in multiples of the pipeline degree: "
                        f"train.gradient_accumulation_steps {micro_batches} is not a multiple of {pp}")
    shard = par.sharding_parallel_degree
    if shard is not None and dp % shard:
        problems.append(f"tensor {tp} x pipeline {pp} x sharding {shard} = {tp * pp * shard} does not divide the "
                        f"{world} ranks of case name {str(name)!r}: sharding_parallel_degree must divide the "
                        f"data-parallel degree {dp} (data ranks = plain data-parallel groups x shard group size)")
    if par.sharding != "none" and dp == 1 and shard != 1:  # an explicit degree 1 is a no-op, as in Paddle
        problems.append(f"sharding {par.sharding} needs more than one data-parallel rank")
    return problems

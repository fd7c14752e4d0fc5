"""Fleet for this run's layout: the strategy, the seeds, and the distributed model, optimizer and scaler."""
from __future__ import annotations

import paddle

from training.paddle.precision import Precision
from training.contract.spec import WorkloadSpec


def strategy(spec: WorkloadSpec, layout):
    from paddle.distributed import fleet

    result = fleet.DistributedStrategy()
    result.hybrid_configs = layout.hybrid_configs()
    if layout.pp > 1:
        result.pipeline_configs = {"accumulate_steps": spec.train.gradient_accumulation_steps,
                                   "micro_batch_size": spec.train.micro_batch_size}
    return result


def seed(value: int, layout) -> None:
    """One seed for replicated parameters on every rank, one per shard for tensor-parallel shards.

    Fleet's parallel layers draw their shards under the model-parallel RNG tracker, every other
    parameter (norms, positions, row biases) from the global generator. One global seed makes those
    identical across the tensor-parallel group without a broadcast: the group-sharded stage 2/3 path
    wraps no ``TensorParallel``, whose broadcast would otherwise be the only thing equalising them. The
    tracker's seed per (tp rank, stage) follows fleet's ``model_parallel_random_seed``, which, unseeded
    as ``fleet.init`` calls it, would draw from numpy's unseeded generator: shards would differ per run.
    """
    if layout.tp > 1:
        from paddle.distributed.fleet.layers.mpu.random import MODEL_PARALLEL_RNG, get_rng_state_tracker

        tracker = get_rng_state_tracker()
        tracker.reset()
        tracker.add(MODEL_PARALLEL_RNG, value + 1 + layout.tp_rank * layout.pp + layout.pp_rank)
    paddle.seed(value)


def group_sharded(spec: WorkloadSpec, layout) -> bool:
    """Sharding stage 2/3 over more than one rank: ``group_sharded_parallel`` instead of fleet's wrappers."""
    return spec.parallel.sharding in ("stage2", "stage3") and layout.sharding > 1


def wrap(model, optimizer, precision: Precision, spec: WorkloadSpec, layout, hcg):
    """(model, optimizer) wrapped for the layout; ``precision.scaler`` becomes the matching scaler.

    Group sharding gets the plain scaler and returns its ``GroupShardedScaler``, which unscales and
    checks for inf the gradients of this rank's slices (stage 3 holds no others) and all-reduces the
    verdict; fleet's ``distributed_scaler`` reads the optimizer's whole parameter list instead.
    """
    if group_sharded(spec, layout):
        from paddle.distributed.sharding import group_sharded_parallel

        level = "os_g" if spec.parallel.sharding == "stage2" else "p_g_os"
        model, optimizer, precision.scaler = group_sharded_parallel(
            model, optimizer, level=level, scaler=precision.scaler, group=hcg.get_sharding_parallel_group(),
            offload=spec.parallel.offload)
        return model, optimizer
    from paddle.distributed import fleet

    if precision.scaler is not None:
        precision.scaler = fleet.distributed_scaler(precision.scaler)
    return fleet.distributed_model(model), fleet.distributed_optimizer(optimizer)

"""The PaddlePaddle training loop: fleet hybrid parallel, timed like the PyTorch loop.

Started by ``python -m paddle.distributed.launch`` (one launcher per node). The
layout vocabulary is the PyTorch side's (``training/spec.py``); it maps onto
``fleet.DistributedStrategy().hybrid_configs``:

  tensor_parallel_degree              mp_degree (ColumnParallelLinear / RowParallelLinear / VocabParallelEmbedding)
  sequence_parallel                   fleet's sequence_parallel_utils: [seq/tp, batch, hidden] activations between
                                      the tensor-parallel layers, norm gradients all-reduced by fleet's hooks
  pipeline_parallel_degree            pp_degree (PipelineLayer; micro-batches = gradient_accumulation_steps)
  sharding + sharding_parallel_degree sharding_degree; stage1 through fleet's sharding optimizer,
                                      stage2/3 through group_sharded_parallel (accelerators only)
  data ranks left over                dp_degree

Each step is timed between two device synchronisations; warm-up steps are
recorded but flagged. The loss of a micro-batch is its summed cross entropy
over the global token count of the step, so any layout reports the loss one
process with the whole batch would.
"""
from __future__ import annotations

import contextlib
import os
import resource
import time

import paddle
import paddle.distributed as dist

from training import flops, perflog
from training.faults import check_faults
from training.paddle.data import open_pretraining_data
from training.paddle.model import GPT, Kernels
from training.paddle.weights import canonical_name, load as load_weights
from training.spec import WorkerConfig, WorkloadSpec
from training.sysinfo import node_environment, process_age_s
from training.unsupported import UnsupportedOnDevice

class Layout:
    """The hybrid degrees of this run and this rank's place in them."""

    def __init__(self, spec: WorkloadSpec, world: int):
        par = spec.parallel
        self.world = world
        self.tp, self.pp = par.tensor_parallel_degree, par.pipeline_parallel_degree
        self.data = par.data_degree(world)
        sharded = par.sharding != "none"
        self.sharding = (par.sharding_parallel_degree or self.data) if sharded else 1
        self.dp = self.data // self.sharding
        self.tp_rank = self.pp_rank = self.data_rank = 0

    @property
    def hybrid(self) -> bool:
        return self.world > 1

    def hybrid_configs(self) -> dict:
        return {"dp_degree": self.dp, "mp_degree": self.tp, "pp_degree": self.pp, "sharding_degree": self.sharding}

    def locate(self, hcg) -> None:
        self.tp_rank = hcg.get_model_parallel_rank()
        self.pp_rank = hcg.get_stage_id()
        # Data ranks take global samples by index: dp and sharding together split the batch.
        self.data_rank = hcg.get_data_parallel_rank() * self.sharding + hcg.get_sharding_parallel_rank()


def _dist_env() -> tuple[int, int, int, int]:
    rank = int(os.environ.get("PADDLE_TRAINER_ID", 0))
    world = int(os.environ.get("PADDLE_TRAINERS_NUM", 1))
    local_rank = int(os.environ.get("PADDLE_LOCAL_RANK", 0))
    return rank, world, local_rank, int(os.environ.get("ACCELBENCH_NODE_RANK", 0))


def _set_device(kind: str) -> str:
    if kind == "cuda":
        if not paddle.device.is_compiled_with_cuda():
            raise UnsupportedOnDevice("this Paddle build has no CUDA (install paddlepaddle-gpu)")
        return paddle.set_device("gpu")  # the launcher's FLAGS_selected_gpus picks this rank's device
    return paddle.set_device("cpu")


def _on_gpu() -> bool:
    return paddle.get_device().startswith("gpu")


def _synchronize() -> None:
    if _on_gpu():
        paddle.device.synchronize()


def _check_supported(spec: WorkloadSpec, layout: Layout) -> None:
    if _on_gpu():
        return
    precision = spec.train.precision
    if precision != "fp32":
        raise UnsupportedOnDevice(f"Paddle's {precision} mixed precision needs an accelerator: on a CPU place "
                                  "AMP has no effect and bf16 kernels are missing")
    if spec.parallel.sharding in ("stage2", "stage3") and layout.sharding > 1:
        raise UnsupportedOnDevice(f"Paddle's sharding {spec.parallel.sharding} (group_sharded_parallel) runs on "
                                  "GPU/XPU only; use sharding stage1 on a CPU")


def _strategy(spec: WorkloadSpec, layout: Layout):
    from paddle.distributed import fleet

    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = layout.hybrid_configs()
    if layout.pp > 1:
        strategy.pipeline_configs = {"accumulate_steps": spec.train.gradient_accumulation_steps,
                                     "micro_batch_size": spec.train.micro_batch_size}
    return strategy


def _kernels(spec: WorkloadSpec) -> Kernels:
    gpu = _on_gpu()
    return Kernels(flash_attention=gpu and spec.train.fused_attention and spec.train.precision in ("fp16", "bf16"),
                   fused_rms_norm=gpu and spec.train.fused_norm)


def build_model(spec: WorkloadSpec, layout: Layout):
    """The model of this rank (a pipeline stage under pipeline parallelism), with the case's initial weights."""
    kernels = _kernels(spec)
    if layout.pp > 1:
        from training.paddle.pipeline import pipeline_model
        model, named = pipeline_model(spec, layout, kernels)
    else:
        model = GPT(spec.model, layout.tp, layout.tp_rank, kernels, spec.parallel.sequence_parallel)
        named = [(canonical_name(name), p) for name, p in model.named_parameters()]
        if spec.train.recompute != "none":
            model.recompute_every = 1 if spec.train.recompute == "full" else spec.train.recompute_every
    if spec.train.init_weights:
        load_weights(named, spec.train.init_weights, layout.tp_rank, layout.tp)
    if spec.parallel.sequence_parallel and layout.tp > 1:
        # Norms and row biases see this rank's sequence slice only: fleet's hooks all-reduce their
        # gradients across the tensor-parallel group once per step (after the last micro-batch). Not the
        # fused variant: its hook takes the gradient as an argument, but `_register_backward_hook` calls
        # hooks without one, so backward fails (Paddle 3.3: "GradNodePyLayer_ReduceScatterOp:Get backward
        # function failed").
        from paddle.distributed.fleet.utils.sequence_parallel_utils import register_sequence_parallel_allreduce_hooks
        register_sequence_parallel_allreduce_hooks(model, spec.train.gradient_accumulation_steps,
                                                   fuse_sequence_parallel_allreduce=False)
    return model


class Precision:
    """AMP for fp16/bf16 on an accelerator: O1 autocast or O2 low-precision weights, fp16 with loss scaling."""

    def __init__(self, spec: WorkloadSpec):
        self.name = spec.train.precision
        self.level = spec.train.amp_level
        self.dtype = {"fp16": "float16", "bf16": "bfloat16"}.get(self.name)
        self.scaler = None

    def decorate(self, model, optimizer, hybrid: bool):
        if self.dtype is None:
            return model, optimizer
        if self.level == "O2":
            model, optimizer = paddle.amp.decorate(models=model, optimizers=optimizer, level="O2",
                                                   dtype=self.dtype, master_weight=True)
        if self.name == "fp16":
            self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**15)
            if hybrid:
                from paddle.distributed import fleet
                self.scaler = fleet.distributed_scaler(self.scaler)
        return model, optimizer

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(level=self.level, dtype=self.dtype)


def _sharded_stage23(model, optimizer, spec: WorkloadSpec, hcg):
    from paddle.distributed.sharding import group_sharded_parallel

    level = "os_g" if spec.parallel.sharding == "stage2" else "p_g_os"
    model, optimizer, _ = group_sharded_parallel(model, optimizer, level=level, group=hcg.get_sharding_parallel_group(),
                                                 offload=spec.parallel.offload)
    return model, optimizer


def _peak_memory() -> tuple[int, int | None, str]:
    if _on_gpu():
        device = paddle.device.get_device()
        total = paddle.device.cuda.get_device_properties(device).total_memory
        return paddle.device.cuda.max_memory_allocated(device), total, "gpu_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, node_environment()["memory_total_bytes"], "rss"


def _framework_environment() -> dict:
    env = {"paddle": paddle.__version__, "paddle_commit": paddle.version.commit,
           "paddle_cuda": paddle.version.cuda() if paddle.device.is_compiled_with_cuda() else None,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    if _on_gpu():
        env["accelerator"] = paddle.device.cuda.get_device_name()
        env["accelerator_count"] = paddle.device.cuda.device_count()
    return env


def train(cfg: WorkerConfig) -> None:
    rank, world, local_rank, node_rank = _dist_env()
    spec, runtime = cfg.workload, cfg.runtime
    _set_device(runtime.device)
    layout = Layout(spec, world)
    _check_supported(spec, layout)
    hcg = None
    if layout.hybrid:
        from paddle.distributed import fleet
        fleet.init(is_collective=True, strategy=_strategy(spec, layout))
        hcg = fleet.get_hybrid_communicate_group()
        layout.locate(hcg)
        if not _on_gpu():
            from training.paddle import cpu_compat
            cpu_compat.install()
    # Model-parallel shards draw their own values; replicated parameters are broadcast by fleet.
    paddle.seed(spec.train.seed + 1009 * layout.tp_rank)
    model = build_model(spec, layout)
    n_params = flops.total_params(spec.model)
    optimizer = paddle.optimizer.AdamW(learning_rate=spec.train.lr, parameters=model.parameters(),
                                       weight_decay=spec.train.weight_decay, beta1=0.9, beta2=0.999, epsilon=1e-8)
    precision = Precision(spec)
    model, optimizer = precision.decorate(model, optimizer, layout.hybrid)
    if layout.hybrid:
        from paddle.distributed import fleet
        if spec.parallel.sharding in ("stage2", "stage3") and layout.sharding > 1:
            model, optimizer = _sharded_stage23(model, optimizer, spec, hcg)
        else:
            model = fleet.distributed_model(model)
            optimizer = fleet.distributed_optimizer(optimizer)
    data = open_pretraining_data(spec, layout.data_rank, layout.data)
    accumulation = spec.train.gradient_accumulation_steps
    share = layout.tp * layout.pp
    tokens_per_micro_batch = spec.train.micro_batch_size * spec.model.seq_len
    tokens_per_step = perflog.share_of(tokens_per_micro_batch * accumulation, share)
    flops_per_token, flop_formula = flops.flops_per_token(spec.model, spec.train)

    environment = {**node_environment(), **_framework_environment()} if local_rank == 0 else None
    perflog.emit(perflog.StartRecord(
        rank=rank, local_rank=local_rank, node_rank=node_rank, world_size=world,
        framework="paddle", framework_version=paddle.__version__, device=paddle.get_device(),
        precision=precision.name, n_params=n_params, flops_per_token=float(flops_per_token),
        flop_formula=flop_formula, tokens_per_step=tokens_per_step, environment=environment,
        trainable_params=n_params, data={"source": spec.data.source, **data.description},
        init_time_s=process_age_s(),
    ))

    no_sync = getattr(model, "no_sync", None)  # plain data parallel: sync gradients on the last micro-batch only
    for step in range(spec.train.steps):
        check_faults(spec.debug, rank, step, lambda size: paddle.empty([size], dtype="uint8"))
        _synchronize()
        started = time.perf_counter()
        batches = [data.next_batch() for _ in range(accumulation)]
        if layout.pp > 1:
            loss = _pipeline_step(model, optimizer, batches, precision)
        else:
            loss = paddle.zeros([], dtype="float32")
            for index, (inputs, targets) in enumerate(batches):
                last = index == accumulation - 1
                sync = contextlib.nullcontext() if last or no_sync is None else no_sync()
                with sync:
                    with precision.autocast():
                        micro = model(paddle.to_tensor(inputs), paddle.to_tensor(targets))
                        micro = micro / (tokens_per_micro_batch * accumulation)
                    (precision.scaler.scale(micro) if precision.scaler else micro).backward()
                loss += micro.detach()
            if precision.scaler:
                precision.scaler.step(optimizer)
                precision.scaler.update()
            else:
                optimizer.step()
        _synchronize()
        elapsed = time.perf_counter() - started
        optimizer.clear_grad()
        if world > 1:  # every rank holds its replica's loss: average over the data replicas
            dist.all_reduce(loss)
            loss = loss / world
        perflog.emit(perflog.StepRecord(
            rank=rank, step=step, warmup=step < spec.train.warmup_steps, step_time_s=elapsed,
            tokens=tokens_per_step, loss=float(loss.item()),
        ))

    peak, total, kind = _peak_memory()
    perflog.emit(perflog.EndRecord(rank=rank, steps=spec.train.steps, peak_memory_bytes=peak,
                                   memory_total_bytes=total, memory_kind=kind))


def _pipeline_step(model, optimizer, batches, precision):
    """One step of the fleet pipeline: its scheduler runs the micro-batches (accumulate_steps) itself."""
    import numpy as np

    inputs = paddle.to_tensor(np.concatenate([b[0] for b in batches]))
    targets = paddle.to_tensor(np.concatenate([b[1] for b in batches]))
    with precision.autocast():
        loss = model.train_batch([inputs, targets], optimizer, scaler=precision.scaler)
    return loss.detach().astype("float32")

"""The PyTorch training loop, instrumented for honest timing.

Each step is timed on the wall clock between two device synchronisations;
warm-up steps are run and recorded but flagged, and the orchestrator leaves them
out of every figure. Perf records are written after the second clock read, so
writing them costs nothing inside a measured step.
"""
from __future__ import annotations

import functools
import math
import os
import resource
import time

import torch
import torch.distributed as dist

from training import flops, perflog
from training.faults import check_faults
from training.data import open_dataset
from training.spec import WorkerConfig
from training.sysinfo import node_environment, process_age_s
from training.torch import precision as precisions
from training.torch.lora import apply_lora, trainable_parameters
from training.torch.model import GPT
from training.torch.parallel import parallelize
from training.torch.weights import load as load_weights

def _dist_env() -> tuple[int, int, int, int]:
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    node_rank = int(os.environ.get("GROUP_RANK", os.environ.get("ACCELBENCH_NODE_RANK", 0)))
    return rank, world, local_rank, node_rank


def _device(kind: str, local_rank: int) -> torch.device:
    if kind == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_memory(device: torch.device) -> tuple[int, int | None, str]:
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        return torch.cuda.max_memory_allocated(device), total, "cuda_allocated"
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return peak_rss, node_environment()["memory_total_bytes"], "rss"


def _framework_environment(device: torch.device) -> dict:
    env = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        env["accelerator"] = torch.cuda.get_device_name(device)
        env["accelerator_count"] = torch.cuda.device_count()
        env["cuda_driver"] = _nvidia_driver()
    return env


def _nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return None


def _global_count(local: int, parallel, device: torch.device, world: int, exact: bool) -> int:
    """Supervised tokens in the global batch: an all-reduce where batches differ (instruction data)."""
    if not exact:  # every position of every sample is supervised: the count is the same on every rank
        return local * parallel.dp_size
    count = torch.tensor(local, device=device, dtype=torch.int64)
    if world > 1:
        dist.all_reduce(count)  # ranks that share one replica (tensor parallel) hold the same batch
    return int(count.item()) // parallel.model_parallel_size


def train(cfg: WorkerConfig) -> None:
    rank, world, local_rank, node_rank = _dist_env()
    spec, runtime = cfg.workload, cfg.runtime
    device = _device(runtime.device, local_rank)
    if world > 1:
        dist.init_process_group(runtime.dist_backend, device_id=device if device.type == "cuda" else None)

    precision = precisions.resolve(spec.train.precision, device)  # before any work: fp8 may be unsupported
    torch.manual_seed(spec.train.seed)  # identical initial weights on every rank
    model = GPT(spec.model)
    if spec.train.init_weights:
        load_weights(model, spec.train.init_weights)
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    if spec.train.lora_rank:
        apply_lora(model, spec.train)
    precision.convert(model)
    trainable = sum(p.numel() for p in trainable_parameters(model))
    parallel = parallelize(model, spec, world, rank, device)
    scaler = precision.grad_scaler(parallel.shards_gradients)
    data = open_dataset(spec, dp_rank=parallel.dp_rank, dp_size=parallel.dp_size)
    accumulation = spec.train.gradient_accumulation_steps
    # Ranks that split one model replica share its tokens: each reports its share, so the sum over
    # ranks is the global batch and tokens/s per device stays honest.
    share = parallel.model_parallel_size
    tokens_per_step = perflog.share_of(spec.train.micro_batch_size * spec.model.seq_len * accumulation, share)
    flops_per_token, flop_formula = flops.flops_per_token(spec.model, spec.train)

    @functools.cache
    def flops_at_width(width: int) -> int:  # instruction batches are padded to their own width, not seq_len
        return flops.flops_per_token(spec.model.model_copy(update={"seq_len": width}), spec.train)[0]

    environment = None
    if local_rank == 0:
        environment = {**node_environment(), **_framework_environment(device)}
    perflog.emit(perflog.StartRecord(
        rank=rank, local_rank=local_rank, node_rank=node_rank, world_size=world,
        framework="torch", framework_version=torch.__version__, device=str(device), precision=precision.name,
        n_params=n_params, flops_per_token=float(flops_per_token), flop_formula=flop_formula,
        tokens_per_step=tokens_per_step, environment=environment, trainable_params=trainable,
        data=data.description, init_time_s=process_age_s(),
    ))

    for step in range(spec.train.steps):
        check_faults(spec.debug, rank, step, lambda size: torch.empty(size, dtype=torch.uint8, device=device))
        _synchronize(device)
        started = time.perf_counter()
        batches = [data.next_batch() for _ in range(accumulation)]
        if parallel.pipeline is not None:  # a pipeline's shapes are fixed at its first step
            batches = [b.padded_to(spec.model.seq_len) for b in batches]
        padded = sum(b.padded_tokens for b in batches)
        real = sum(b.real_tokens for b in batches)
        step_flops = sum(b.padded_tokens * flops_at_width(b.inputs.shape[1]) for b in batches)
        # The step's loss is the mean over every supervised token of the global batch, as one process
        # with the whole batch would take it, whatever the layout or accumulation: each micro-batch's
        # summed loss is divided by the global count, times dp_size since data parallelism averages.
        supervised = _global_count(sum(b.supervised_tokens for b in batches), parallel, device, world,
                                   exact=spec.data.instruction)
        loss_sum = parallel.forward_backward(batches, parallel.dp_size / max(supervised, 1), precision, scaler,
                                             device)
        scaler.step(parallel.optimizer)
        scaler.update()
        _synchronize(device)
        elapsed = time.perf_counter() - started
        grad_norm = parallel.grad_norm(device)  # outside the timed step
        grad_norm = grad_norm if math.isfinite(grad_norm) else None  # an fp16 step skipped on overflow
        parallel.optimizer.zero_grad(set_to_none=True)
        if world > 1:  # the loss of the whole batch, as one process would see it (outside the timed step)
            dist.all_reduce(loss_sum)
            loss_sum /= parallel.loss_copies
        perflog.emit(perflog.StepRecord(
            rank=rank, step=step, warmup=step < spec.train.warmup_steps,
            step_time_s=elapsed, tokens=perflog.share_of(padded, share), loss=float(loss_sum.item()),
            effective_tokens=perflog.share_of(real, share) if spec.data.instruction else None,
            flops=step_flops / share if spec.data.instruction else None, grad_norm=grad_norm,
        ))

    peak, total, kind = _peak_memory(device)
    perflog.emit(perflog.EndRecord(rank=rank, steps=spec.train.steps, peak_memory_bytes=peak,
                                   memory_total_bytes=total, memory_kind=kind))
    if world > 1:
        dist.destroy_process_group()

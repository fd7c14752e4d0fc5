"""The PyTorch training loop, instrumented for honest timing.

Each step is timed on the wall clock between two device synchronisations;
warm-up steps are run and recorded but flagged, and the orchestrator leaves them
out of every figure. Perf records are written after the second clock read, so
writing them costs nothing inside a measured step.
"""
from __future__ import annotations

import os
import resource
import time

import torch
import torch.distributed as dist

from training import flops, perflog
from training.data.synthetic import SyntheticTokens
from training.spec import WorkerConfig
from training.sysinfo import node_environment
from training.torch.model import GPT
from training.torch.parallel import parallelize

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class InjectedFailure(RuntimeError):
    """Raised by ``debug.fail_at_step``: the orchestrator's crash path, exercised for real."""


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


def _check_faults(cfg: WorkerConfig, rank: int, step: int) -> None:
    debug = cfg.workload.debug
    if debug.fail_at_step == step and debug.fail_rank == rank:
        raise InjectedFailure(f"injected failure on rank {rank} at step {step} (debug.fail_at_step)")
    if debug.hang_at_step == step and debug.fail_rank == rank:
        while True:
            time.sleep(60)


def train(cfg: WorkerConfig) -> None:
    rank, world, local_rank, node_rank = _dist_env()
    spec, runtime = cfg.workload, cfg.runtime
    device = _device(runtime.device, local_rank)
    if world > 1:
        dist.init_process_group(runtime.dist_backend, device_id=device if device.type == "cuda" else None)

    torch.manual_seed(spec.train.seed)  # identical initial weights on every rank
    model = GPT(spec.model).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    parallel = parallelize(model, spec, world, rank, device)
    precision = spec.train.precision
    autocast_dtype = _AUTOCAST_DTYPES.get(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    data = SyntheticTokens(spec.model.vocab_size, spec.model.seq_len, spec.train.micro_batch_size,
                           spec.train.seed, dp_rank=parallel.dp_rank, dp_size=parallel.dp_size)
    accumulation = spec.train.gradient_accumulation_steps
    # Ranks that split one model replica share its tokens: each reports its share, so the sum over
    # ranks is the global batch and tokens/s per device stays honest.
    tokens_per_step = spec.train.micro_batch_size * spec.model.seq_len * accumulation / parallel.model_parallel_size
    tokens_per_step = int(tokens_per_step) if tokens_per_step.is_integer() else tokens_per_step

    environment = None
    if local_rank == 0:
        environment = {**node_environment(), **_framework_environment(device)}
    perflog.emit(perflog.StartRecord(
        rank=rank, local_rank=local_rank, node_rank=node_rank, world_size=world,
        framework="torch", framework_version=torch.__version__, device=str(device), precision=precision,
        n_params=n_params, flops_per_token=float(flops.training_flops_per_token(spec.model)),
        flop_formula=flops.FORMULA, tokens_per_step=tokens_per_step, environment=environment,
    ))

    for step in range(spec.train.steps):
        _check_faults(cfg, rank, step)
        _synchronize(device)
        started = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        for micro in range(accumulation):
            inputs, targets = (t.to(device, non_blocking=True) for t in data.next_batch())
            with parallel.gradient_sync(micro == accumulation - 1):
                with torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                    enabled=autocast_dtype is not None):
                    loss = parallel.model(inputs, targets) / accumulation
                scaler.scale(loss).backward()
            loss_sum += loss.detach()
        scaler.step(parallel.optimizer)
        scaler.update()
        parallel.optimizer.zero_grad(set_to_none=True)
        _synchronize(device)
        elapsed = time.perf_counter() - started
        if world > 1:  # the loss of the whole batch, as one process would see it (outside the timed step)
            dist.all_reduce(loss_sum)
            loss_sum /= world
        perflog.emit(perflog.StepRecord(
            rank=rank, step=step, warmup=step < spec.train.warmup_steps,
            step_time_s=elapsed, tokens=tokens_per_step, loss=float(loss_sum.item()),
        ))

    peak, total, kind = _peak_memory(device)
    perflog.emit(perflog.EndRecord(rank=rank, steps=spec.train.steps, peak_memory_bytes=peak,
                                   memory_total_bytes=total, memory_kind=kind))
    if world > 1:
        dist.destroy_process_group()

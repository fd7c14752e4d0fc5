"""What a layout takes per optimizer step, defined once for both halves: its world size, the samples one model
replica takes, the global batch and the tokens per step.

    world size        nodes x processes per node
    replica batch     micro batch x accumulation steps (PPO: experience batch x update timesteps, the samples
                      an update makes and learns from on each rank)
    global batch      replica batch x the data-parallel degree
    tokens per step   global batch x the tokens of a sample (model.seq_len; PPO: prompt + generated tokens)

The worker reports its share of them (training/train_task.py, ppo_task.py: ranks that split one replica share
its samples, so the sum over ranks is the global batch); the orchestrator reads what the workers reported and
uses these where it has no worker to ask: planning and its estimates, a row's layout facts, the learning-rate
rule of a case's policy, and the logs of workers from before the start record carried ``samples_per_step``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the world size alone is read by case names, which --help and list parse without pydantic
    from training.contract.spec import WorkloadSpec


def world_size(nnodes: int, nprocs_per_node: int) -> int:
    return nnodes * nprocs_per_node


def replica_batch(workload: WorkloadSpec) -> int:
    """Samples one model replica takes per optimizer step (a micro-benchmark takes none: 0)."""
    if workload.ppo is not None:
        return workload.ppo.update_timesteps * workload.ppo.experience_batch_size
    if workload.micro is not None:
        return 0
    return workload.train.micro_batch_size * workload.train.gradient_accumulation_steps


def sample_tokens(workload: WorkloadSpec) -> int:
    """Tokens of one sample: the sequence length (PPO: the prompt and what is generated after it)."""
    return workload.ppo.total_length if workload.ppo is not None else workload.model.seq_len


def global_batch(workload: WorkloadSpec, world_size: int) -> int:
    """Samples per optimizer step over every rank."""
    return replica_batch(workload) * workload.parallel.data_degree(world_size)


def tokens_per_step(workload: WorkloadSpec, world_size: int) -> int:
    """Tokens per optimizer step over every rank (padding included: effective tokens are the worker's count)."""
    return global_batch(workload, world_size) * sample_tokens(workload)

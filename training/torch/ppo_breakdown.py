"""PPO's time breakdown: ``train.breakdown_steps`` dedicated learning updates after the measured ones, each split
per phase with training/breakdown.py's method (every part between two device synchronisations; collectives
inside another part timed one by one through ``Collectives.run`` and moved into communication).

  experience  per making (``update_timesteps`` of them): data (the prompts; ``debug.data_fetch_delay_ms``),
              compute in two parts, generation (with the actor's parameters gathered: FSDP's all-gathers
              under stage2/3 are timed apart) and scoring (the actor's, initial's, critic's and reward's
              forwards; FSDP's all-gathers of whichever is sharded timed apart); then a barrier (wait: the
              slowest rank's makings)
  learning    per epoch, batch and trained role (actor, then critic): forward and backward with gradient sync
              off (DDP's ``no_sync``; FSDP's reduce-scatters and all-gathers run inside and are timed apart), a
              barrier (wait), the gradient all-reduces bucket by bucket in DDP's sizes and order, the optimizer
              (ZeRO-1's parameter broadcast timed apart); compute in two parts, actor and critic

Each rank sends one ``BreakdownRecord`` per phase (``phase``); the two together are its whole update (the
orchestrator adds them: run_benchmarks/results/breakdown/ppo.py). An untimed barrier starts each update, so a
phase never holds the wait for the other phase of a slower rank. The updates are real (the models move on);
their cost is ``breakdown_steps`` more learning updates, serialised, after the measured window. Helpers are
pretraining's (training/torch/breakdown.py): DDP's buckets, FSDP2's hooks, ZeRO-1's broadcast.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from training.breakdown import Collectives
from training.contract import perflog
from training.torch.breakdown import all_reduce_buckets, time_fsdp, time_zero1
from training.torch.ppo_experience import Experience, sample_sequences, score

PHASES = ("experience", "learning")
PARTS = {"experience": ("generation", "scoring"), "learning": ("actor", "critic")}
METHOD = ("serialised phases of dedicated learning updates after the measured ones: experience making (prompts, "
          "generation, scoring, a barrier) and learning (per role: forward+backward with gradient sync off, a "
          "barrier, the gradient collectives one by one, the optimizer); each part between two device "
          "synchronisations; collectives inside a part (FSDP, ZeRO-1) timed one by one after a barrier and moved "
          "into communication")


class Tally:
    """One phase's seconds over one update, its compute parts, and its collectives in order."""

    def __init__(self, phase: str, inner: Collectives):
        self.inner = inner
        self.seconds = dict.fromkeys(perflog.BreakdownRecord.PER_STEP, 0.0)
        self.parts = dict.fromkeys(PARTS[phase], 0.0)
        self.ops: list[tuple[str, int]] = []

    def collectives(self) -> float:
        """Moves what ``inner`` timed since the last call into wait and communication; their sum."""
        wait, communication = self.inner.take()
        self.seconds["wait_s"] += wait
        self.seconds["communication_s"] += communication
        self.ops += self.inner.ops
        self.inner.ops = []
        return wait + communication

    def compute(self, part: str, seconds: float) -> None:
        own = seconds - self.collectives()
        self.parts[part] += own
        self.seconds["compute_s"] += own


def _clock(sync: Callable[[], None]) -> float:
    sync()
    return time.perf_counter()


def _no_sync(model) -> contextlib.AbstractContextManager:
    return model.no_sync() if isinstance(model, DistributedDataParallel) else contextlib.nullcontext()


def _experience(worker, inner: Collectives, sync, barrier) -> tuple[list[Experience], Tally]:
    tally = Tally("experience", inner)
    began = _clock(sync)
    made = []
    for _ in range(worker.ppo.update_timesteps):
        start = _clock(sync)
        prompts = worker.prompts()
        fetched = _clock(sync)
        tally.seconds["data_s"] += fetched - start
        worker.compute_delay()
        with worker.actor.gathered():  # FSDP: the actor's all-gathers, timed apart by ``inner``
            sequences = sample_sequences(worker.actor.plain, prompts, worker.ppo, worker.generator,
                                         worker.precision.autocast)
            generated = _clock(sync)
            tally.compute("generation", generated - fetched)
            made.append(score(worker.roles, sequences, worker.ppo, worker.precision.autocast))
        tally.compute("scoring", _clock(sync) - generated)
    computed = _clock(sync)
    barrier()
    ended = time.perf_counter()
    tally.seconds["wait_s"] += ended - computed
    tally.seconds["step_s"] = ended - began
    return made, tally


def _learning(worker, made: list[Experience], inner: Collectives, sync, barrier) -> Tally:
    tally = Tally("learning", inner)
    began = _clock(sync)
    buffer = Experience.cat(made)
    epochs = [worker.batches(buffer) for _ in range(worker.ppo.max_epochs)]
    tally.seconds["data_s"] += _clock(sync) - began
    for batches in epochs:
        for batch in batches:
            for part, role, loss_of in (("actor", worker.actor, worker.actor_loss),
                                        ("critic", worker.critic, worker.critic_loss)):
                start = _clock(sync)
                worker.compute_delay()
                with _no_sync(role.model):  # FSDP: its reduce-scatters run in backward, timed apart
                    loss_of(batch).backward()
                computed = _clock(sync)
                tally.compute(part, computed - start)
                barrier()
                aligned = time.perf_counter()
                sizes = []
                if isinstance(role.model, DistributedDataParallel):
                    sizes = all_reduce_buckets(role.model, worker.world, worker.spec.debug.collective_delay_ms)
                communicated = _clock(sync)
                tally.ops += [("allreduce", b) for b in sizes]
                role.optimizer.step()  # ZeRO-1: its parameter broadcast, timed apart
                optimized = _clock(sync)
                tally.seconds["wait_s"] += aligned - computed
                tally.seconds["communication_s"] += communicated - aligned
                tally.seconds["optimizer_s"] += optimized - communicated - tally.collectives()
                role.optimizer.zero_grad(set_to_none=True)
    tally.seconds["step_s"] = _clock(sync) - began
    return tally


def _timed_collectives(worker, inner: Collectives) -> None:
    """Route every collective that runs inside a part through ``inner``: FSDP2's (trained roles under stage2/3,
    the frozen ones under stage3) and ZeRO-1's parameter broadcast."""
    from torch.distributed.fsdp import FSDPModule

    for model in (worker.actor.model, worker.critic.model, worker.roles.initial, worker.roles.reward):
        if isinstance(model, FSDPModule):
            time_fsdp(model, inner)
    for role in (worker.actor, worker.critic):
        if hasattr(role.optimizer, "_sync_params"):  # ZeroRedundancyOptimizer
            time_zero1(role.model, role.optimizer, inner)


def measure(worker, steps: int, sync: Callable[[], None]) -> list[perflog.BreakdownRecord]:
    """``steps`` breakdown updates on ``worker`` (a PPOWorker after its measured updates): one record per phase."""
    rank = worker.ranks.rank
    if steps == 0:
        return [perflog.BreakdownRecord(rank=rank, steps=0, method=METHOD, phase=phase,
                                        not_measured="train.breakdown_steps is 0") for phase in PHASES]
    barrier = dist.barrier if worker.world > 1 else (lambda: None)
    inner = Collectives(sync, barrier, worker.spec.debug.collective_delay_ms)
    _timed_collectives(worker, inner)
    tallies: list[dict[str, Tally]] = []
    for _ in range(steps):
        barrier()  # untimed: every rank starts the update together
        made, experience = _experience(worker, inner, sync, barrier)
        tallies.append({"experience": experience, "learning": _learning(worker, made, inner, sync, barrier)})
    records = []
    for phase in PHASES:
        last = tallies[-1][phase]
        records.append(perflog.BreakdownRecord(
            rank=rank, steps=steps, phase=phase, method=METHOD, group_size=worker.world,
            bucket_bytes=[b for _, b in last.ops], collective_ops=[op for op, _ in last.ops],
            compute_parts={part: [t[phase].parts[part] for t in tallies] for part in PARTS[phase]},
            **{name: [t[phase].seconds[name] for t in tallies] for name in perflog.BreakdownRecord.PER_STEP}))
    return records

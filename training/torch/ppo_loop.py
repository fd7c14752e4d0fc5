"""Task ppo: the RLHF loop ColossalAI chat's benchmark times, on the PyTorch worker.

Per episode, ``max_timesteps`` experience makings; every ``update_timesteps`` of them, ``max_epochs`` passes
of learning over what was collected (one perf step record per learning update: its experience making and
its learning). Each phase is timed between device synchronisations; the first episode is warm-up and is
left out of the phase figures (and flagged warm-up in the step records). Figures: perf records of kind
``figure`` per rank, combined by the orchestrator (``run_benchmarks/results/figures.py``). After the measured
updates, ``train.breakdown_steps`` more, split per phase (training/torch/ppo_breakdown.py): one breakdown record
per phase.
"""
from __future__ import annotations


import torch
import torch.distributed as dist

from training.contract import flops, perflog
from training import harness
from training.contract.spec import WorkerConfig
from training.torch import device as devices
from training.torch import precision as precisions
from training.torch import ppo_breakdown
from training.torch.parallel import init_device
from training.faults import compute_delay, sleep_ms
from training.torch.ppo_experience import Experience, action_values, make_experience
from training.torch.ppo_loss import policy_loss, value_loss
from training.torch.ppo_models import action_log_probs, build_roles
from training.torch.ppo_parallel import parallelize_roles


class PPOWorker(devices.OnTorchDevice):
    """One rank's roles, optimizers and clocks; duck-types the harness's memory hooks (``on_cpu`` ...)."""

    framework, version = "torch", torch.__version__

    def __init__(self, cfg: WorkerConfig, ranks: harness.Ranks):
        spec, self.ranks = cfg.workload, ranks
        self.spec, self.ppo, self.world = spec, spec.ppo, ranks.world_size
        self.torch_device = devices.open_device(cfg.runtime.device, ranks.local_rank)
        self.device, self.on_cpu = str(self.torch_device), self.torch_device.type == "cpu"
        # False where the process already had a group (tests that train several workers in one): not ours to end
        self.owns_process_group = self.world > 1 and devices.init_process_group(cfg.runtime.device, self.torch_device,
                                                                                spec.parallel.offload)
        self.precision = precisions.resolve(spec.train.precision, self.torch_device)
        torch.manual_seed(spec.train.seed)
        self.critic_spec = self.ppo.critic_model(spec.model)
        roles = build_roles(spec.model, self.critic_spec, spec.train, init_device(spec, self.torch_device))
        self.n_params = sum(p.numel() for r in (roles.actor, roles.critic) for p in r.parameters())
        self.trainable_params = sum(p.numel() for r in (roles.actor, roles.critic)
                                    for p in r.parameters() if p.requires_grad)
        self.actor, self.critic, self.roles = parallelize_roles(roles, spec, self.world, self.torch_device)
        self.generator = torch.Generator(self.torch_device).manual_seed(spec.train.seed + 1000 * (ranks.rank + 1))
        self.phase = flops.ppo_phase_flops(spec.model, self.critic_spec, self.ppo.prompt_length,
                                           self.ppo.generation_length, spec.train)

    def prompts(self) -> torch.Tensor:
        """One making's random prompts (``debug.data_fetch_delay_ms`` after them: the data path's cost)."""
        prompts = torch.randint(0, self.spec.model.vocab_size, (self.ppo.experience_batch_size,
                                                                self.ppo.prompt_length),
                                device=self.torch_device, generator=self.generator)
        sleep_ms(self.spec.debug.data_fetch_delay_ms)
        return prompts

    def compute_delay(self) -> None:
        """``debug.compute_delay_ms`` on ``debug.fail_rank``: before each experience making and before each trained
        role's forward and backward (a straggler)."""
        compute_delay(self.spec.debug, self.ranks.rank)

    def experience(self) -> Experience:
        prompts = self.prompts()
        self.compute_delay()
        with self.actor.gathered():
            return make_experience(self.roles, self.actor.plain, prompts, self.ppo, self.generator,
                                   self.precision.autocast)

    def actor_loss(self, batch: Experience) -> torch.Tensor:
        with self.precision.autocast():
            return policy_loss(action_log_probs(self.actor.model, batch.sequences, self.ppo.generation_length),
                               batch.log_probs, batch.advantages.unsqueeze(-1), self.ppo.clip_eps)

    def critic_loss(self, batch: Experience) -> torch.Tensor:
        with self.precision.autocast():
            values = action_values(self.critic.model, batch.sequences, self.ppo.generation_length).float()
            return value_loss(values, batch.values, batch.returns, self.ppo.value_clip)

    def batches(self, buffer: Experience) -> list[Experience]:
        """One epoch's batches of ``train_batch_size``."""
        return buffer.split(self.ppo.train_batch_size or self.spec.train.micro_batch_size)

    def learn(self, buffer: Experience) -> tuple[torch.Tensor, torch.Tensor]:
        """``max_epochs`` passes in ``train_batch_size`` batches; the last batch's actor and critic losses."""
        for _ in range(self.ppo.max_epochs):
            for batch in self.batches(buffer):
                losses = []
                for role, loss_of in ((self.actor, self.actor_loss), (self.critic, self.critic_loss)):
                    self.compute_delay()
                    loss = loss_of(batch)
                    loss.backward()
                    role.optimizer.step()
                    role.optimizer.zero_grad(set_to_none=True)
                    losses.append(loss.detach())
        return losses[0], losses[1]

    def environment(self) -> dict:
        return devices.environment(self.torch_device)

    def close(self) -> None:
        if self.owns_process_group:
            dist.destroy_process_group()


def run(cfg: WorkerConfig) -> None:
    ranks = harness.read_ranks(harness.RankVariables(rank="RANK", world_size="WORLD_SIZE", local_rank="LOCAL_RANK",
                                                      node_rank="GROUP_RANK"))
    worker = PPOWorker(cfg, ranks)
    spec, ppo = worker.spec, worker.ppo
    s, per_update = ppo.total_length, ppo.update_timesteps * ppo.experience_batch_size
    per_sample = worker.phase["generation"].total + worker.phase["forwards"].total
    per_sample += ppo.max_epochs * worker.phase["learning"].total
    perflog.emit(perflog.StartRecord(
        rank=ranks.rank, local_rank=ranks.local_rank, node_rank=ranks.node_rank, world_size=ranks.world_size,
        framework=worker.framework, framework_version=worker.version, device=worker.device,
        precision=spec.train.precision, n_params=worker.n_params, flops_per_token=per_sample / s,
        flop_formula=flops.PPO_FORMULA, tokens_per_step=per_update * s, samples_per_step=per_update,
        trainable_params=worker.trainable_params,
        data={"source": "random prompts", "prompt_length": ppo.prompt_length,
              "generation_length": ppo.generation_length},
        environment=harness.node_facts(cfg.runtime.device, worker, None) if ranks.local_rank == 0 else None))
    clocks = {"experience": 0.0, "learning": 0.0, "iteration": 0.0}  # the measured steps' seconds

    def update(step: int) -> tuple:
        """One learning update: experience made ``update_timesteps`` times, then learned from; each phase
        timed between synchronisations for its own figures, the whole step by the timed loop."""
        made, experience_s = [], 0.0
        for _ in range(ppo.update_timesteps):
            experience, seconds = harness.timed(worker, worker.experience)
            made.append(experience)
            experience_s += seconds
        losses, learning_s = harness.timed(worker, worker.learn, Experience.cat(made))
        return losses, experience_s, learning_s

    def record(step: int, warmup: bool, elapsed: float, ended_at: float, work: tuple) -> perflog.StepRecord:
        (actor_loss, critic_loss), experience_s, learning_s = work
        if not warmup:
            clocks["experience"] += experience_s
            clocks["learning"] += learning_s
            clocks["iteration"] += elapsed
        loss = actor_loss + critic_loss  # untimed: the mean over the ranks, as one process would see it
        if worker.world > 1:
            dist.all_reduce(loss)
            loss /= worker.world
        return perflog.StepRecord(rank=ranks.rank, step=step, warmup=warmup, step_time_s=elapsed,
                                  tokens=per_update * s, loss=float(loss), ended_at=ended_at)

    harness.timed_loop(spec, ranks.rank, worker, update, record)  # train.steps = episodes x updates per episode
    step = spec.train.steps
    measured = (ppo.num_episodes - 1) * ppo.updates_per_episode * per_update  # samples made per rank
    for record in phase_figures(worker, clocks, measured):
        perflog.emit(record)
    peak, reserved, total, kind = harness.peak_memory(worker)  # the measured updates' peak, before the breakdown's
    for record in ppo_breakdown.measure(worker, spec.train.breakdown_steps, lambda: harness.synchronize(worker)):
        perflog.emit(record)
    perflog.emit(perflog.EndRecord(rank=ranks.rank, steps=step, peak_memory_bytes=peak, memory_total_bytes=total,
                                   memory_kind=kind, peak_memory_reserved_bytes=reserved))
    worker.close()


def phase_figures(worker: PPOWorker, clocks: dict, samples: int) -> list[perflog.FigureRecord]:
    """Each phase's throughput on this rank (summed over ranks for the total, averaged for per device) and its
    measured seconds (``<phase>.time_s``, averaged: the reports' time split per phase)."""
    ppo, phase, rank = worker.ppo, worker.phase, worker.ranks.rank
    learned = samples * ppo.max_epochs
    exp_flops = samples * (phase["generation"].total + phase["forwards"].total)
    exp_attention = samples * (phase["generation"].attention + phase["forwards"].attention)
    exp_ref = samples * (phase["generation"].reference + phase["forwards"].reference)
    values = {
        "experience.samples_per_s": (samples / clocks["experience"], "samples/s"),
        "experience.generated_tokens_per_s": (samples * ppo.generation_length / clocks["experience"], "tokens/s"),
        "experience.tflops": (exp_flops / clocks["experience"] / 1e12, "TFLOP/s"),
        "experience.tflops_attention_part": (exp_attention / clocks["experience"] / 1e12, "TFLOP/s"),
        "experience.tflops_reference": (exp_ref / clocks["experience"] / 1e12, "TFLOP/s"),
        "learning.samples_per_s": (learned / clocks["learning"], "samples/s"),
        "learning.tokens_per_s": (learned * ppo.total_length / clocks["learning"], "tokens/s"),
        "learning.tflops": (learned * phase["learning"].total / clocks["learning"] / 1e12, "TFLOP/s"),
        "learning.tflops_attention_part": (learned * phase["learning"].attention / clocks["learning"] / 1e12,
                                           "TFLOP/s"),
        "learning.tflops_reference": (learned * phase["learning"].reference / clocks["learning"] / 1e12, "TFLOP/s"),
        "iteration.samples_per_s": (samples / clocks["iteration"], "samples/s"),
    }
    records = []
    for name, (value, unit) in values.items():
        formula = flops.PPO_REFERENCE_FORMULA if name.endswith("_reference") else flops.PPO_FORMULA
        if name.endswith("_attention_part"):
            formula = "the attention score and value products alone, of " + flops.PPO_FORMULA
        records.append(perflog.FigureRecord(rank=rank, name=name, value=value, unit=unit, reduce="sum",
                                            formula=formula if "tflops" in name else None))
        records.append(perflog.FigureRecord(rank=rank, name=name + "_per_device", value=value, unit=unit,
                                            reduce="mean"))
    for part in ("experience", "learning", "iteration"):  # the seconds the rates above divide by: the time split
        records.append(perflog.FigureRecord(rank=rank, name=f"{part}.time_s", value=clocks[part], unit="s",
                                            better="lower", reduce="mean"))
    peak = harness.peak_memory(worker)[0]
    records.append(perflog.FigureRecord(rank=rank, name="peak_memory_gib", value=peak / 2**30, unit="GiB",
                                        better="lower", reduce="max"))
    return records

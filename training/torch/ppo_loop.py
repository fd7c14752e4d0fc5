"""Task ppo's operations in torch: the roles (actor, critic, initial, reward), experience making and learning.

The task itself (the timed updates, the phase figures, the records) is framework-neutral:
training/ppo_task.py, run by the one lifecycle (training/harness.py). After the measured updates,
``train.breakdown_steps`` more, split per phase (training/torch/ppo_breakdown.py).
"""
from __future__ import annotations


import torch
import torch.distributed as dist

from training.contract import flops
from training import harness, ppo_task
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
        self.data_description = {"source": "random prompts", "prompt_length": self.ppo.prompt_length,
                                 "generation_length": self.ppo.generation_length}

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

    def collect(self, made: list[Experience]) -> Experience:
        """One buffer of an update's experience makings."""
        return Experience.cat(made)

    def mean_loss(self, losses: tuple[torch.Tensor, torch.Tensor]) -> float:
        """Untimed: the actor's plus the critic's loss, the mean over the ranks, as one process would see it."""
        loss = losses[0] + losses[1]
        if self.world > 1:
            dist.all_reduce(loss)
            loss /= self.world
        return float(loss)

    def breakdown(self, steps: int, sync) -> list:
        return ppo_breakdown.measure(self, steps, sync)

    def environment(self) -> dict:
        return devices.environment(self.torch_device)

    def close(self) -> None:
        if self.owns_process_group:
            dist.destroy_process_group()


def run(cfg: WorkerConfig) -> None:
    """Task ppo on torch: the one lifecycle (training/harness.py) over the PPO task (training/ppo_task.py)."""
    harness.run(cfg, ppo_task.over(PPOWorker))

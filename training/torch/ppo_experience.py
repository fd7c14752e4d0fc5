"""Making experience: the actor generates from random prompts (``sample_sequences``), then all four models score
the sequences (``score``); the time breakdown times the two apart."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from training.contract.spec import PPOSpec
from training.torch.ppo_generate import generate
from training.torch.ppo_models import Roles, action_log_probs
from training.torch.ppo_loss import shaped_reward


@dataclass
class Experience:
    sequences: torch.Tensor  # (b, P + G)
    log_probs: torch.Tensor  # (b, G) the actor's, when it generated
    values: torch.Tensor  # (b,) the critic's mean over the actions
    returns: torch.Tensor  # (b,) reward less the KL penalty
    advantages: torch.Tensor  # (b,)

    def split(self, size: int) -> list["Experience"]:
        parts = [t.split(size) for t in (self.sequences, self.log_probs, self.values, self.returns, self.advantages)]
        return [Experience(*fields) for fields in zip(*parts)]

    @staticmethod
    def cat(items: list["Experience"]) -> "Experience":
        return Experience(*(torch.cat([getattr(e, f) for e in items]) for f in
                            ("sequences", "log_probs", "values", "returns", "advantages")))


def action_values(critic, sequences: torch.Tensor, n_actions: int) -> torch.Tensor:
    """The critic's values at the positions that predict the actions, averaged: one value per sample."""
    return critic(sequences)[:, -n_actions - 1:-1].mean(dim=-1)


@torch.no_grad()
def make_experience(roles: Roles, generator_model, prompts: torch.Tensor, ppo: PPOSpec,
                    generator: torch.Generator, autocast) -> Experience:
    """``generator_model``: the actor's plain module (unwrapped from DDP; FSDP's parameters unsharded)."""
    return score(roles, sample_sequences(generator_model, prompts, ppo, generator, autocast), ppo, autocast)


@torch.no_grad()
def sample_sequences(generator_model, prompts: torch.Tensor, ppo: PPOSpec, generator: torch.Generator,
                     autocast) -> torch.Tensor:
    """Generation: the prompts followed by ``ppo.generation_length`` sampled tokens."""
    with autocast():
        return generate(generator_model, prompts, ppo.generation_length, ppo.temperature, ppo.top_k, generator)


@torch.no_grad()
def score(roles: Roles, sequences: torch.Tensor, ppo: PPOSpec, autocast) -> Experience:
    """Scoring: the four models' forwards over the generated sequences, and the shaped reward."""
    g = ppo.generation_length
    with autocast():
        log_probs = action_log_probs(roles.actor, sequences, g)
        initial = action_log_probs(roles.initial, sequences, g)
        values = action_values(roles.critic, sequences, g).float()
        reward = roles.reward(sequences)[:, -1].float()
    returns = shaped_reward(reward, log_probs, initial, ppo.kl_coef)
    return Experience(sequences, log_probs, values, returns, returns - values)

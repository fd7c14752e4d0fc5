"""The four PPO roles, all from ``training.torch.model.GPT``: actor (LM head) and critic (value head) train;
the initial model (a frozen copy of the actor) and the reward model (a frozen copy of the critic) only run
forward, as in ColossalAI chat's PPO benchmark."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from training.contract.spec import ModelSpec, TrainSpec
from training.torch.lora import apply_lora
from training.torch.model import GPT


class Critic(GPT):
    """The transformer without its LM head, and a value per position."""

    def __init__(self, spec: ModelSpec, seed: int | None = None):
        super().__init__(spec, seed)
        self.lm_head = None  # tied: the weight stays as the embedding; untied: gone
        self.value_head = nn.Linear(spec.d_model, 1)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (b, t) values
        return self.value_head(self.ln_f(self.run_blocks(self.embed(idx)))).squeeze(-1)


def log_probs_of(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-probability of each of ``tokens`` under ``logits`` (positions aligned)."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def action_log_probs(actor: nn.Module, sequences: torch.Tensor, n_actions: int) -> torch.Tensor:
    """Log-probs of the last ``n_actions`` tokens: logits at position t predict token t + 1."""
    logits = actor(sequences)
    return log_probs_of(logits[:, -n_actions - 1:-1], sequences[:, -n_actions:])


@dataclass
class Roles:
    actor: nn.Module
    critic: nn.Module
    initial: nn.Module
    reward: nn.Module


def _frozen(model: nn.Module) -> nn.Module:
    frozen = copy.deepcopy(model).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


def build_roles(actor_spec: ModelSpec, critic_spec: ModelSpec, train: TrainSpec, device: torch.device) -> Roles:
    """Actor from ``train.seed``, critic from the next seed; frozen copies taken before any adapter."""
    with torch.device(device):
        actor = GPT(actor_spec, seed=train.seed)
        torch.manual_seed(train.seed + 1)
        critic = Critic(critic_spec, seed=train.seed + 1)
    initial, reward = _frozen(actor), _frozen(critic)
    if train.lora_rank:  # only adapters train (and the critic's value head, as in the reference)
        apply_lora(actor, train)
        apply_lora(critic, train)
        critic.value_head.requires_grad_(True)
    return Roles(actor, critic, initial, reward)

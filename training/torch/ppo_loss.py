"""PPO's losses and the experience's reward shaping (as ColossalAI chat computes them)."""
from __future__ import annotations

import torch


def shaped_reward(reward: torch.Tensor, log_probs: torch.Tensor, initial_log_probs: torch.Tensor,
                  kl_coef: float) -> torch.Tensor:
    """The reward model's score less ``kl_coef`` x the actions' mean KL to the initial model: (b,)."""
    kl = (log_probs - initial_log_probs).mean(dim=-1)
    return reward - kl_coef * kl


def policy_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                clip_eps: float) -> torch.Tensor:
    """Clipped surrogate: the pessimistic of the ratio and its clip, times the advantage."""
    ratio = (log_probs - old_log_probs).exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages)
    return -surrogate.mean()


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float) -> torch.Tensor:
    """Clipped value loss: the larger of the plain and the clipped squared error."""
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return 0.5 * torch.max((values - returns) ** 2, (clipped - returns) ** 2).mean()

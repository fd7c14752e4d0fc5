"""Sampling from the actor with a KV cache: the prompt in one pass, then one token per step.

Runs the blocks' own projections (``Attention.q/k/v/proj``, ``MLP``) so whatever wraps them (LoRA,
mixed precision) applies; learned positions only (GPT-2, OPT), which ``training.spec`` checks.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from training.torch.model import GPT


def _block_step(block, x: torch.Tensor, cache: list, start: int) -> torch.Tensor:
    """One block over the new positions ``x`` (b, t, d), appending their keys and values to ``cache``."""
    inner = getattr(block, "block", block)  # a recompute wrapper holds the block
    attn, mlp, ln_1, ln_2 = inner.attn, inner.mlp, inner.ln_1, inner.ln_2
    b, t, _ = x.shape
    h = ln_1(x)
    q, k, v = (proj(h).view(b, t, -1, attn.head_dim).transpose(1, 2) for proj in (attn.q, attn.k, attn.v))
    if cache:
        k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
    cache[:] = [k, v]
    # A single new query sees every cached key: no mask (is_causal would align it to the first key).
    y = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0, enable_gqa=q.shape[1] != k.shape[1])
    x = x + attn.proj(y.transpose(1, 2).reshape(b, t, -1))
    return x + mlp(ln_2(x))


def sample(logits: torch.Tensor, temperature: float, top_k: int, generator: torch.Generator) -> torch.Tensor:
    logits = logits.float() / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)


@torch.no_grad()
def generate(model: GPT, prompts: torch.Tensor, new_tokens: int, temperature: float, top_k: int,
             generator: torch.Generator) -> torch.Tensor:
    """``prompts`` (b, P) followed by ``new_tokens`` sampled tokens: (b, P + new_tokens)."""
    caches = [[] for _ in model.blocks]
    sequence, fresh, start = prompts, prompts, 0
    for i in range(new_tokens):
        x = model.wte(fresh) + model.wpe(torch.arange(start, start + fresh.shape[1], device=fresh.device))
        if model.emb_norm is not None:
            x = model.emb_norm(x)
        for block, cache in zip(model.blocks, caches):
            x = _block_step(block, x, cache, start)
        token = sample(model.lm_head(model.ln_f(x[:, -1:])).squeeze(1), temperature, top_k, generator)
        sequence = torch.cat((sequence, token), dim=1)
        start += fresh.shape[1]
        fresh = token
    return sequence

"""One decoder-only transformer, configured per architecture by ``ModelSpec``.

Attention goes through ``scaled_dot_product_attention`` so fused (flash,
memory-efficient) kernels are used wherever the device has them. ALiBi needs an
explicit additive mask, which rules out the flash kernel for that family.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from training import positions
from training.data.instruction import IGNORE_INDEX
from training.contract.spec import ModelSpec


def _norm(spec: ModelSpec) -> nn.Module:
    if spec.norm == "rmsnorm":
        return nn.RMSNorm(spec.d_model, eps=1e-5)
    return nn.LayerNorm(spec.d_model, bias=spec.bias)


def _rotary_tables(spec: ModelSpec) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (spec.rope_theta ** (torch.arange(0, spec.head_dim, 2, dtype=torch.float32) / spec.head_dim))
    angles = torch.outer(torch.arange(spec.seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def _apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    t = x.shape[-2]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[:t].to(x.dtype), sin[:t].to(x.dtype)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def alibi_slopes(n_head: int) -> torch.Tensor:
    return torch.tensor(positions.alibi_slopes(n_head), dtype=torch.float32)


def alibi_causal_mask(slopes: torch.Tensor, t: int, dtype: torch.dtype) -> torch.Tensor:
    """(1, H, t, t) additive mask: -slope * distance to each earlier key, -inf on later ones."""
    pos = torch.arange(t, device=slopes.device)
    distance = (pos.view(1, t) - pos.view(t, 1)).to(torch.float32)  # key - query: <= 0 for visible keys
    bias = slopes.view(-1, 1, 1) * distance
    bias = bias.masked_fill(distance > 0, float("-inf"))
    return bias.unsqueeze(0).to(dtype)


class Attention(nn.Module):
    """Separate q, k, v projections, so tensor parallelism can split them by whole heads.

    Head counts are read from the projections' outputs, not the spec: under tensor
    parallelism each rank holds only its share of the heads.
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.head_dim = spec.head_dim
        self.head_offset = 0  # first head this rank holds; set by tensor parallelism (ALiBi slopes are per head)
        kv_width = spec.kv_heads * spec.head_dim
        self.q = nn.Linear(spec.d_model, spec.d_model, bias=spec.bias)
        self.k = nn.Linear(spec.d_model, kv_width, bias=spec.bias)
        self.v = nn.Linear(spec.d_model, kv_width, bias=spec.bias)
        self.proj = nn.Linear(spec.d_model, spec.d_model, bias=spec.bias)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (proj(x).view(b, t, -1, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        if rotary is not None:
            q, k = _apply_rotary(q, *rotary), _apply_rotary(k, *rotary)
        gqa = q.shape[1] != k.shape[1]
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            mask = mask[:, self.head_offset:self.head_offset + q.shape[1]]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        return self.proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.activation = spec.activation
        hidden = spec.ffn_hidden
        self.fc = nn.Linear(spec.d_model, hidden, bias=spec.bias)
        self.gate = nn.Linear(spec.d_model, hidden, bias=spec.bias) if spec.activation == "swiglu" else None
        self.proj = nn.Linear(hidden, spec.d_model, bias=spec.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.proj(F.silu(self.gate(x)) * self.fc(x))
        h = self.fc(x)
        h = F.gelu(h, approximate="tanh") if self.activation == "gelu" else F.relu(h)
        return self.proj(h)


class Block(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.ln_1, self.attn = _norm(spec), Attention(spec)
        self.ln_2, self.mlp = _norm(spec), MLP(spec)

    def forward(self, x: torch.Tensor, rotary=None, mask=None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), rotary, mask)
        return x + self.mlp(self.ln_2(x))


class TransformerPart(nn.Module):
    """What the whole model and each pipeline stage share: the embedding, position context, head.

    A part holds whichever of ``wte``/``wpe``/``emb_norm`` (first), ``blocks`` and
    ``ln_f``/``lm_head`` (last) it owns; the missing ones are None.
    """

    spec: ModelSpec
    wte: nn.Embedding | None
    wpe: nn.Embedding | None
    emb_norm: nn.Module | None
    blocks: nn.ModuleList
    ln_f: nn.Module | None
    lm_head: nn.Linear | None
    dynamic_width = False  # compiled blocks, batches of varying width: one graph for every width

    def _register_position_buffers(self, device: torch.device | None = None) -> None:
        if self.spec.position == "rotary":
            cos, sin = _rotary_tables(self.spec)
            self.register_buffer("rotary_cos", cos.to(device), persistent=False)
            self.register_buffer("rotary_sin", sin.to(device), persistent=False)
        if self.spec.position == "alibi":
            self.register_buffer("alibi_slopes", alibi_slopes(self.spec.n_head).to(device), persistent=False)

    def reset_position_buffers(self, device: torch.device) -> None:
        """Computed again after ``to_empty``, which leaves buffers uninitialised."""
        with torch.device("cpu"):
            self._register_position_buffers(device)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return x

    def run_blocks(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        rotary = (self.rotary_cos, self.rotary_sin) if self.spec.position == "rotary" else None
        mask = alibi_causal_mask(self.alibi_slopes, t, x.dtype) if self.spec.position == "alibi" else None
        if self.dynamic_width and mask is not None:
            torch._dynamo.maybe_mark_dynamic(mask, 2)
            torch._dynamo.maybe_mark_dynamic(mask, 3)
        for block in self.blocks:
            if self.dynamic_width:  # each block's input is a new tensor: mark each
                torch._dynamo.maybe_mark_dynamic(x, 1)
            x = block(x, rotary, mask)
        return x

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln_f(x))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross entropy over supervised positions: their mean, or their sum.

    Targets -100 (prompt or padding in instruction data) carry no loss; a micro-batch
    whose prompts filled the whole window has no supervised position and gives 0, not NaN.
    """
    total = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="sum")
    return total if reduction == "sum" else total / targets.ne(IGNORE_INDEX).sum().clamp(min=1)


class GPT(TransformerPart):
    """Initialised from ``seed`` (default: torch's, as ``torch.manual_seed`` set it) unless built on the
    meta device, where the worker initialises it after splitting it (``training.torch.init``)."""

    def __init__(self, spec: ModelSpec, seed: int | None = None):
        super().__init__()
        self.spec = spec
        self.wte = nn.Embedding(spec.vocab_size, spec.d_model)
        self.wpe = nn.Embedding(spec.seq_len, spec.d_model) if spec.position == "learned" else None
        self.emb_norm = _norm(spec) if spec.embedding_norm else None
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.n_layer))
        self.ln_f = _norm(spec)
        self.lm_head = nn.Linear(spec.d_model, spec.vocab_size, bias=False)
        if spec.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self._register_position_buffers()
        if not self.wte.weight.is_meta:
            from training.torch.init import fill

            fill(self, torch.initial_seed() if seed is None else seed, spec.n_layer)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, reduction: str = "mean"):
        """Logits, or with ``targets`` the loss (see ``lm_loss``)."""
        logits = self.head(self.run_blocks(self.embed(idx)))
        return logits if targets is None else lm_loss(logits, targets, reduction)

"""Analytic training FLOPs per token.

    flops_per_token = 6 * N_matmul + 12 * L * H * Q * T

N_matmul counts the weights of every matrix multiply (attention q/k/v/output,
the MLP, the LM head); embedding lookups, norms and biases do no matmul and are
left out. 6 = 2 (multiply-add) x 3 (forward, and backward for both the input and
the weight gradients). The second term is the attention score and value
products, L layers, H heads of width Q over T positions, counted over the full
T x T square as is the convention (and as ``torch.utils.flop_counter`` counts
it), although a causal mask could skip half. For GPT-2 XL the embedding
parameters left out are 0.1 % of N, so this equals the common ``6N + 12LHQT``
with N counting all parameters to that precision.
"""
from __future__ import annotations

from .spec import ModelSpec

FORMULA = "6*N_matmul + 12*L*H*Q*T per token (fwd+bwd; N_matmul = matmul weights incl. LM head)"


def _layer_matmul_params(model: ModelSpec) -> int:
    d, f = model.d_model, model.ffn_hidden
    kv_width = model.kv_heads * model.head_dim
    attention = 2 * d * d + 2 * d * kv_width  # q and output; k and v (narrower under GQA)
    mlp = (3 if model.activation == "swiglu" else 2) * d * f
    return attention + mlp


def matmul_params(model: ModelSpec) -> int:
    return model.n_layer * _layer_matmul_params(model) + model.d_model * model.vocab_size  # + LM head


def total_params(model: ModelSpec) -> int:
    """Every parameter of ``training.torch.model.GPT`` built from ``model`` (tied weights counted once)."""
    d, f = model.d_model, model.ffn_hidden
    kv_width = model.kv_heads * model.head_dim
    norm = d * (2 if model.norm == "layernorm" and model.bias else 1)  # weight (+ bias)
    biases = (d + 2 * kv_width + d + (2 if model.activation == "swiglu" else 1) * f + d) if model.bias else 0
    per_layer = _layer_matmul_params(model) + biases + 2 * norm
    embeddings = model.vocab_size * d + (model.seq_len * d if model.position == "learned" else 0)
    lm_head = 0 if model.tie_embeddings else model.vocab_size * d
    final_norms = norm * (2 if model.embedding_norm else 1)
    return model.n_layer * per_layer + embeddings + lm_head + final_norms


def attention_flops_per_token(model: ModelSpec) -> int:
    return 12 * model.n_layer * model.n_head * model.head_dim * model.seq_len


def training_flops_per_token(model: ModelSpec) -> int:
    return 6 * matmul_params(model) + attention_flops_per_token(model)

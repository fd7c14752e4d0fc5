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


def matmul_params(model: ModelSpec) -> int:
    d, f = model.d_model, model.ffn_hidden
    attention = 4 * d * d
    mlp = (3 if model.activation == "swiglu" else 2) * d * f
    lm_head = d * model.vocab_size
    return model.n_layer * (attention + mlp) + lm_head


def attention_flops_per_token(model: ModelSpec) -> int:
    return 12 * model.n_layer * model.n_head * model.head_dim * model.seq_len


def training_flops_per_token(model: ModelSpec) -> int:
    return 6 * matmul_params(model) + attention_flops_per_token(model)

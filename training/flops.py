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

from .spec import ModelSpec, TrainSpec

LORA_FORMULA = ("LoRA: 2*N fwd + 2*N input-gradient per frozen matmul (no weight gradient; none at all where its "
                "input needs no gradient, as in the first block), 6*N per adapter matmul, + 12*L*H*Q*T "
                "less the attention gradients no adapter needs")
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


def flops_per_token(model: ModelSpec, train: TrainSpec) -> tuple[int, str]:
    """The FLOPs one trained token costs under ``train``, and the formula that gave them."""
    if train.lora_rank is None:
        return training_flops_per_token(model), FORMULA
    return lora_training_flops_per_token(model, train), LORA_FORMULA


def lora_training_flops_per_token(model: ModelSpec, train: TrainSpec) -> int:
    """Frozen weights get no weight gradient, and no input gradient where nothing before them trains.

    The embeddings are frozen, so the first block's input needs no gradient: its frozen
    projections run forward only, and the attention computes only the gradients an
    adapter downstream needs. From the second block on, every input needs a gradient.
    """
    first = _lora_block_flops(model, train, input_needs_grad=False)
    rest = _lora_block_flops(model, train, input_needs_grad=True)
    lm_head = 4 * model.d_model * model.vocab_size  # frozen: forward + input gradient
    return first + (model.n_layer - 1) * rest + lm_head


def _lora_block_flops(model: ModelSpec, train: TrainSpec, input_needs_grad: bool) -> int:
    d, f, r = model.d_model, model.ffn_hidden, train.lora_rank
    kv = model.kv_heads * model.head_dim
    hqt = model.n_head * model.head_dim * model.seq_len
    targets = set(train.lora_targets)
    total = 0

    def linear(name: str, n_in: int, n_out: int, needs_grad: bool) -> bool:
        """Adds one projection's FLOPs; returns whether its output needs a gradient."""
        nonlocal total
        total += 2 * n_in * n_out * (2 if needs_grad else 1)  # forward (+ input gradient)
        if name in targets:
            # A: forward, weight gradient (+ input gradient); B: forward, weight and input gradients
            total += 2 * r * n_in * (3 if needs_grad else 2) + 6 * r * n_out
        return needs_grad or name in targets

    q = linear("q", d, d, input_needs_grad)
    k = linear("k", d, kv, input_needs_grad)
    v = linear("v", d, kv, input_needs_grad)
    scores_grad = q or k
    total += 4 * hqt + 2 * hqt * (q + k + v + scores_grad)  # forward; dq, dk, dv and d(probabilities)
    attention_out = linear("o", d, d, scores_grad or v)
    x = input_needs_grad or attention_out
    hidden = linear("fc", d, f, x)
    if model.activation == "swiglu":
        hidden = linear("gate", d, f, x) or hidden
    linear("down", f, d, hidden)
    return total

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

from dataclasses import dataclass

from training.contract.spec import ModelSpec, TrainSpec

LORA_FORMULA = ("LoRA: 2*N fwd + 2*N input-gradient per frozen matmul (no weight gradient; none at all where its "
                "input needs no gradient, as in the first block), 6*N per adapter matmul, + 12*L*H*Q*T "
                "less the attention gradients no adapter needs")
FORMULA = "6*N_matmul + 12*L*H*Q*T per token (fwd+bwd; N_matmul = matmul weights incl. LM head)"


def tflop_per_s(flops: float, seconds: float = 1.0, devices: int = 1) -> float:
    """TFLOP/s per device: ``flops`` done in ``seconds`` by ``devices`` devices (1 TFLOP/s = 1e12 FLOP/s). The one
    definition of the figure: the worker's phase figures, a round's and an import's (results/figures/derive.py)."""
    return flops / seconds / devices / 1e12


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


def _projection_shapes(model: ModelSpec) -> dict[str, tuple[int, int]]:
    """(inputs, outputs) of each projection of a block, by its ``lora_targets`` name."""
    d, f, kv = model.d_model, model.ffn_hidden, model.kv_heads * model.head_dim
    shapes = {"q": (d, d), "k": (d, kv), "v": (d, kv), "o": (d, d), "fc": (d, f), "down": (f, d)}
    if model.activation == "swiglu":
        shapes["gate"] = (d, f)
    return shapes


def lora_adapter_forward_per_token(model: ModelSpec, train: TrainSpec) -> int:
    """The adapters' own forward FLOPs per token, 2*r*(inputs + outputs) per adapted projection of every
    block (A then B); 0 without LoRA. What a LoRA model adds to a forward-only pass (PPO's generation and
    scoring forwards)."""
    if train.lora_rank is None:
        return 0
    shapes = _projection_shapes(model)
    return model.n_layer * sum(2 * train.lora_rank * sum(shapes[t]) for t in train.lora_targets if t in shapes)


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


# --- RLHF PPO (task ppo): FLOPs per sample of each phase -------------------------------------------------
PPO_REFERENCE_FORMULA = (
    "ColossalAI chat's count (N = all parameters, S = prompt P + generated G): experience = "
    "2*N_actor*sum_{L=P}^{S-1} L (generation, the growing sequence recomputed) + 2*S*(N_actor + N_critic + "
    "N_initial + N_reward); learning = (6, 8 with recompute)*S*(N_actor + N_critic); no attention term")
PPO_FORMULA = (
    "what runs (M = matmul weights of the blocks, V vocab, d width; KV cache): generation = 2*M_a*(P+G-1) "
    "+ 2*d*V*G + attention 4*L*d*(P^2 + sum_{k=P+1}^{S-1} k); forwards = 2*S*(2*(M_a + d*V) + 2*(M_c + d_c)) "
    "+ attention 2*4*L*d*S^2 per model pair; learning = 3 (4 with recompute) x the forward of actor and critic "
    "(LoRA: the LoRA formula per token at width S; generation and the actor's and critic's forwards add "
    "2*r*(in+out) per adapted projection per token); attention shown apart")


@dataclass(frozen=True)
class PhaseFlops:
    """One PPO phase's FLOPs per sample: matmuls and attention apart, and the reference's count."""

    matmul: int
    attention: int
    reference: int

    @property
    def total(self) -> int:
        return self.matmul + self.attention


def _blocks_matmul(model: ModelSpec) -> int:
    return model.n_layer * _layer_matmul_params(model)


def _attention_fwd(model: ModelSpec, queries: int, keys: int) -> int:
    """Score and value products of one sequence, full square (as ``torch.utils.flop_counter``)."""
    return 4 * model.n_layer * model.n_head * model.head_dim * queries * keys


def critic_params(model: ModelSpec) -> int:
    """``training.torch.ppo_models.Critic``: the transformer without its LM head, plus a value head (w, b)."""
    lm_head = 0 if model.tie_embeddings else model.vocab_size * model.d_model
    return total_params(model) - lm_head + model.d_model + 1


def ppo_phase_flops(actor: ModelSpec, critic: ModelSpec, prompt: int, generated: int,
                    train: TrainSpec) -> dict[str, PhaseFlops]:
    """Per sample: ``generation`` and ``forwards`` (together experience making) and ``learning`` (one epoch)."""
    s = prompt + generated
    head_a, head_c = actor.d_model * actor.vocab_size, critic.d_model
    n_a, n_c = total_params(actor), critic_params(critic)
    adapters_a = lora_adapter_forward_per_token(actor, train)
    adapters_c = lora_adapter_forward_per_token(critic, train)
    generation = PhaseFlops(
        matmul=(2 * _blocks_matmul(actor) + adapters_a) * (prompt + generated - 1) + 2 * head_a * generated,
        attention=_attention_fwd(actor, prompt, prompt)
        + sum(_attention_fwd(actor, 1, k) for k in range(prompt + 1, s)),
        reference=2 * n_a * sum(range(prompt, s)))
    fwd_a, fwd_c = 2 * s * (_blocks_matmul(actor) + head_a), 2 * s * (_blocks_matmul(critic) + head_c)
    attn_a, attn_c = _attention_fwd(actor, s, s), _attention_fwd(critic, s, s)
    # the initial and reward models are frozen copies without adapters: only actor and critic run them
    forwards = PhaseFlops(matmul=2 * (fwd_a + fwd_c) + s * (adapters_a + adapters_c),
                          attention=2 * (attn_a + attn_c),
                          reference=2 * s * 2 * (n_a + n_c))
    passes = 4 if train.recompute != "none" else 3
    if train.lora_rank is None:
        learning = PhaseFlops(matmul=passes * (fwd_a + fwd_c), attention=passes * (attn_a + attn_c),
                              reference=2 * (passes) * s * (n_a + n_c))
    else:  # the LoRA count has its attention gradients folded in: all of it under matmul
        per_token_a = lora_training_flops_per_token(actor.model_copy(update={"seq_len": s}), train)
        per_token_c = (lora_training_flops_per_token(critic.model_copy(update={"seq_len": s}), train)
                       - 4 * critic.d_model * critic.vocab_size + 6 * head_c)  # a trained value head, no LM head
        learning = PhaseFlops(matmul=s * (per_token_a + per_token_c), attention=0,
                              reference=2 * passes * s * (n_a + n_c))
    return {"generation": generation, "forwards": forwards, "learning": learning}

"""The transformer of ``training/torch/model.py``, in PaddlePaddle, tensor-parallel ready.

Same ``ModelSpec``, same parameter names (``wte``, ``blocks.N.attn.q`` ...), same
initialisation scheme (normal 0.02, residual projections scaled by depth, zero
biases). Shapes differ only by Paddle's own convention: a ``Linear`` weight is
``[in, out]`` where torch stores ``[out, in]``; ``weights.py`` converts.

With a model-parallel group (``mp_degree > 1``), q/k/v, fc/gate are fleet
``ColumnParallelLinear``, the projections ``RowParallelLinear``, the token
embedding ``VocabParallelEmbedding`` and the loss ``ParallelCrossEntropy``,
as in Megatron and PaddleNLP; without one they are plain layers.

With sequence parallelism as well (``parallel.sequence_parallel``), fleet's
``sequence_parallel_utils`` carry the activations between blocks as this
rank's ``[seq/tp, batch, hidden]`` slice: the embeddings are scattered
(``ScatterOp``), each block's input is all-gathered once before its column-split
projections (``AllGatherOp``; backward: reduce-scatter), the projections are
``RowSequenceParallelLinear`` (reduce-scatter instead of all-reduce), the norms
run on the slices, and the final norm's output is gathered (``GatherOp``) for
the head. Parameters used on slices only (norms, row biases) are marked
sequence-parallel; ``train.py`` registers fleet's hooks that all-reduce their
gradients across the tensor-parallel group.

Over 300 lines: one model with its tensor- and sequence-parallel layers, which mean something only together.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import paddle
import paddle.nn.functional as F
from paddle import nn

from training import positions
from training.contract.spec import ModelSpec

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Kernels:
    """Fused kernels the device offers and the case asks for (``train.fused_attention`` / ``fused_norm``)."""

    flash_attention: bool = False
    fused_rms_norm: bool = False


def _normal(std: float) -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=nn.initializer.Normal(mean=0.0, std=std))


_ZERO = paddle.ParamAttr(initializer=nn.initializer.Constant(0.0))


class RMSNorm(nn.Layer):
    def __init__(self, width: int, eps: float, fused: bool):
        super().__init__()
        self.eps, self.fused = eps, fused
        self.weight = self.create_parameter([width], default_initializer=nn.initializer.Constant(1.0))

    def forward(self, x):
        if self.fused:
            from paddle.incubate.nn.functional import fused_rms_norm
            return fused_rms_norm(x, self.weight, None, self.eps, begin_norm_axis=x.ndim - 1)[0]
        variance = x.astype("float32").pow(2).mean(axis=-1, keepdim=True)
        return (x.astype("float32") * paddle.rsqrt(variance + self.eps)).astype(x.dtype) * self.weight


def _norm(spec: ModelSpec, kernels: Kernels, on_slices: bool = False) -> nn.Layer:
    """LayerNorm or RMSNorm; ``on_slices``: it sees this rank's sequence slice only, so its gradients are partial."""
    norm = RMSNorm(spec.d_model, 1e-5, kernels.fused_rms_norm) if spec.norm == "rmsnorm" else \
        nn.LayerNorm(spec.d_model, epsilon=1e-5, bias_attr=None if spec.bias else False)
    if on_slices:
        from paddle.distributed.fleet.utils.sequence_parallel_utils import mark_as_sequence_parallel_parameter
        for param in norm.parameters():
            mark_as_sequence_parallel_parameter(param)
    return norm


def scatter_sequence(x):
    """[b, s, h], the same on every tensor-parallel rank -> this rank's [s/tp, b, h] slice (backward: all-gather)."""
    from paddle.distributed.fleet.utils.sequence_parallel_utils import ScatterOp
    return ScatterOp.apply(x.transpose([1, 0, 2]))


def gather_sequence(x):
    """This rank's [s/tp, b, h] slice -> the whole [b, s, h] (backward: this rank's slice of the gradient)."""
    from paddle.distributed.fleet.utils.sequence_parallel_utils import GatherOp
    return GatherOp.apply(x).transpose([1, 0, 2])


def column_projections(x, layers, sequence_parallel: bool) -> list:
    """The column-split projections of one input.

    Under sequence parallelism ``x`` is a [s/tp, b, h] slice: it is all-gathered
    once for all of the layers (fleet's ``AllGatherOp``, whose backward
    reduce-scatters the summed gradient), as Megatron does, rather than once in
    each ``ColumnSequenceParallelLinear``; the outputs are [s, b, out/tp].
    """
    if not sequence_parallel:
        return [layer(x) for layer in layers]
    from paddle.distributed.fleet.utils.sequence_parallel_utils import AllGatherOp
    whole = AllGatherOp.apply(x)
    return [F.linear(whole, layer.weight, layer.bias) for layer in layers]


class Linears:
    """Builds each linear for the layout: plain, column-split or row-split across the model-parallel group."""

    def __init__(self, mp_degree: int, sequence_parallel: bool = False):
        self.mp_degree = mp_degree
        self.sequence_parallel = sequence_parallel and mp_degree > 1

    def column(self, n_in: int, n_out: int, bias: bool, std: float) -> nn.Layer:
        if self.sequence_parallel:
            from paddle.distributed.fleet.utils.sequence_parallel_utils import ColumnSequenceParallelLinear
            return ColumnSequenceParallelLinear(n_in, n_out, weight_attr=_normal(std), has_bias=bias,
                                                gather_output=False)
        if self.mp_degree > 1:
            from paddle.distributed.fleet.meta_parallel import ColumnParallelLinear
            return ColumnParallelLinear(n_in, n_out, weight_attr=_normal(std), has_bias=bias, gather_output=False)
        return nn.Linear(n_in, n_out, weight_attr=_normal(std), bias_attr=_ZERO if bias else False)

    def row(self, n_in: int, n_out: int, bias: bool, std: float) -> nn.Layer:
        if self.sequence_parallel:  # reduce-scatters its output into sequence slices; marks its bias
            from paddle.distributed.fleet.utils.sequence_parallel_utils import RowSequenceParallelLinear
            return RowSequenceParallelLinear(n_in, n_out, weight_attr=_normal(std), has_bias=bias,
                                             input_is_parallel=True)
        if self.mp_degree > 1:
            from paddle.distributed.fleet.meta_parallel import RowParallelLinear
            return RowParallelLinear(n_in, n_out, weight_attr=_normal(std), has_bias=bias, input_is_parallel=True)
        return nn.Linear(n_in, n_out, weight_attr=_normal(std), bias_attr=_ZERO if bias else False)

    def embedding(self, vocab: int, width: int) -> nn.Layer:
        if self.mp_degree > 1:
            from paddle.distributed.fleet.meta_parallel import VocabParallelEmbedding
            return VocabParallelEmbedding(vocab, width, weight_attr=_normal(0.02))
        return nn.Embedding(vocab, width, weight_attr=_normal(0.02))


def rotary_tables(spec: ModelSpec) -> tuple[paddle.Tensor, paddle.Tensor]:
    inv_freq = 1.0 / (spec.rope_theta ** (paddle.arange(0, spec.head_dim, 2, dtype="float32") / spec.head_dim))
    angles = paddle.outer(paddle.arange(spec.seq_len, dtype="float32"), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """x: [b, t, heads, head_dim]; rotates interleaved pairs, as the torch model does."""
    t = x.shape[1]
    cos, sin = cos[:t].unsqueeze(1).astype(x.dtype), sin[:t].unsqueeze(1).astype(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return paddle.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).flatten(-2)


def attention_bias(t: int, slopes: list[float] | None, dtype) -> paddle.Tensor:
    """(1, heads or 1, t, t) additive mask: causal, plus -slope x distance for ALiBi."""
    pos = paddle.arange(t, dtype="float32")
    distance = pos.reshape([1, t]) - pos.reshape([t, 1])  # key - query: <= 0 for visible keys
    future = distance > 0
    if slopes is None:
        bias = paddle.zeros([1, 1, t, t], dtype="float32")
    else:
        bias = paddle.to_tensor(slopes, dtype="float32").reshape([-1, 1, 1]) * distance
        bias = bias.unsqueeze(0)
    bias = paddle.where(future, paddle.full_like(bias, float("-inf")), bias)
    return bias.astype(dtype)


class Attention(nn.Layer):
    def __init__(self, spec: ModelSpec, linears: Linears, kernels: Kernels):
        super().__init__()
        self.head_dim, self.kernels = spec.head_dim, kernels
        self.sequence_parallel = linears.sequence_parallel
        self.local_heads = spec.n_head // linears.mp_degree
        self.local_kv_heads = spec.kv_heads // linears.mp_degree
        kv_width = spec.kv_heads * spec.head_dim
        out_std = 0.02 / math.sqrt(2 * spec.n_layer)
        self.q = linears.column(spec.d_model, spec.d_model, spec.bias, 0.02)
        self.k = linears.column(spec.d_model, kv_width, spec.bias, 0.02)
        self.v = linears.column(spec.d_model, kv_width, spec.bias, 0.02)
        self.proj = linears.row(spec.d_model, spec.d_model, spec.bias, out_std)

    def forward(self, x, rotary=None, bias=None):
        """x: [b, t, d_model], or under sequence parallelism this rank's [t/tp, b, d_model] slice."""
        q, k, v = column_projections(x, (self.q, self.k, self.v), self.sequence_parallel)
        if self.sequence_parallel:  # [t, b, ...] after the all-gather: attention runs batch-major
            q, k, v = (a.transpose([1, 0, 2]) for a in (q, k, v))
        b, t = q.shape[0], q.shape[1]
        q = q.reshape([b, t, self.local_heads, self.head_dim])
        k = k.reshape([b, t, self.local_kv_heads, self.head_dim])
        v = v.reshape([b, t, self.local_kv_heads, self.head_dim])
        if rotary is not None:
            q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
        if self.local_kv_heads != self.local_heads:
            repeat = self.local_heads // self.local_kv_heads
            k, v = k.repeat_interleave(repeat, axis=2), v.repeat_interleave(repeat, axis=2)
        if bias is None and self.kernels.flash_attention:
            from paddle.nn.functional.flash_attention import flash_attention
            y = flash_attention(q, k, v, causal=True)[0]
        else:
            y = _attention(q, k, v, bias)
        y = y.reshape([b, t, -1])
        return self.proj(y.transpose([1, 0, 2]) if self.sequence_parallel else y)


def _attention(q, k, v, bias):
    """Softmax attention, [b, t, heads, head_dim] in and out; softmax in fp32."""
    q, k, v = (a.transpose([0, 2, 1, 3]) for a in (q, k, v))
    scores = paddle.matmul(q, k, transpose_y=True).astype("float32") / math.sqrt(q.shape[-1])
    scores = scores + bias.astype("float32")
    y = paddle.matmul(F.softmax(scores, axis=-1).astype(v.dtype), v)
    return y.transpose([0, 2, 1, 3])


class MLP(nn.Layer):
    def __init__(self, spec: ModelSpec, linears: Linears):
        super().__init__()
        self.activation, self.sequence_parallel = spec.activation, linears.sequence_parallel
        hidden = spec.ffn_hidden
        self.fc = linears.column(spec.d_model, hidden, spec.bias, 0.02)
        self.gate = linears.column(spec.d_model, hidden, spec.bias, 0.02) if spec.activation == "swiglu" else None
        self.proj = linears.row(hidden, spec.d_model, spec.bias, 0.02 / math.sqrt(2 * spec.n_layer))

    def forward(self, x):
        if self.gate is not None:
            gate, fc = column_projections(x, (self.gate, self.fc), self.sequence_parallel)
            return self.proj(F.silu(gate) * fc)
        h, = column_projections(x, (self.fc,), self.sequence_parallel)
        h = F.gelu(h, approximate=True) if self.activation == "gelu" else F.relu(h)
        return self.proj(h)


class Block(nn.Layer):
    def __init__(self, spec: ModelSpec, linears: Linears, kernels: Kernels):
        super().__init__()
        on_slices = linears.sequence_parallel
        self.ln_1, self.attn = _norm(spec, kernels, on_slices), Attention(spec, linears, kernels)
        self.ln_2, self.mlp = _norm(spec, kernels, on_slices), MLP(spec, linears)

    def forward(self, x, rotary=None, bias=None):
        x = x + self.attn(self.ln_1(x), rotary, bias)
        return x + self.mlp(self.ln_2(x))


class PositionContext:
    """What every block needs besides its input: rotary tables or the attention bias (ALiBi heads of this rank)."""

    def __init__(self, spec: ModelSpec, mp_degree: int, mp_rank: int):
        self.spec = spec
        self.rotary = rotary_tables(spec) if spec.position == "rotary" else None
        self.slopes = None
        if spec.position == "alibi":
            local = spec.n_head // mp_degree
            self.slopes = positions.alibi_slopes(spec.n_head)[mp_rank * local:(mp_rank + 1) * local]

    def bias(self, t: int, dtype, flash: bool):
        if flash and self.slopes is None:
            return None  # the flash kernel masks causally by itself
        return attention_bias(t, self.slopes, dtype)


class Embedding(nn.Layer):
    def __init__(self, spec: ModelSpec, linears: Linears, kernels: Kernels):
        super().__init__()
        self.wte = linears.embedding(spec.vocab_size, spec.d_model)
        self.wpe = nn.Embedding(spec.seq_len, spec.d_model, weight_attr=_normal(0.02)) \
            if spec.position == "learned" else None
        self.emb_norm = _norm(spec, kernels) if spec.embedding_norm else None

    def forward(self, idx):
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(paddle.arange(idx.shape[1]))
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return x


class TokenLoss(nn.Layer):
    """Summed cross entropy over supervised positions (targets != -100), in fp32; vocabulary-parallel under TP."""

    def __init__(self, mp_degree: int):
        super().__init__()
        self.mp_degree = mp_degree
        if mp_degree > 1:
            from paddle.distributed.fleet.meta_parallel import ParallelCrossEntropy
            self.cross_entropy = ParallelCrossEntropy(ignore_index=IGNORE_INDEX)

    def forward(self, logits, targets):
        logits = logits.astype("float32")
        if self.mp_degree > 1:
            per_token = self.cross_entropy(logits, targets.unsqueeze(-1)).squeeze(-1)
        else:
            per_token = F.cross_entropy(logits, targets.unsqueeze(-1), ignore_index=IGNORE_INDEX,
                                        reduction="none").squeeze(-1)
        return (per_token * (targets != IGNORE_INDEX).astype("float32")).sum()


def replicated_input(x, mp_degree: int):
    """Logits from a vocabulary-split weight: the input's gradient must sum over the slices (c_identity)."""
    if mp_degree == 1:
        return x
    from paddle.distributed.fleet import get_hybrid_communicate_group
    from paddle.distributed.fleet.layers.mpu import mp_ops
    return mp_ops._c_identity(x, group=get_hybrid_communicate_group().get_model_parallel_group())


class LMHead(nn.Layer):
    """Final norm, logits (this rank's vocabulary slice under tensor parallelism) and the loss.

    Under sequence parallelism the final norm runs on this rank's slice, which is
    then gathered: the LM head sees the whole sequence, as without it.
    """

    def __init__(self, spec: ModelSpec, linears: Linears, kernels: Kernels, tied_embedding=None):
        super().__init__()
        self.mp_degree, self.sequence_parallel = linears.mp_degree, linears.sequence_parallel
        self.ln_f = _norm(spec, kernels, self.sequence_parallel)
        self._tied = (tied_embedding,)  # a tuple: held, not registered a second time as a sublayer
        self.lm_head = None if tied_embedding is not None else \
            Linears(linears.mp_degree).column(spec.d_model, spec.vocab_size, False, 0.02)

    def logits(self, x):
        x = self.ln_f(x)
        if self.sequence_parallel:
            x = gather_sequence(x)
        if self.lm_head is not None:
            return self.lm_head(x)
        return paddle.matmul(replicated_input(x, self.mp_degree), self._tied[0].weight, transpose_y=True)


class GPT(nn.Layer):
    def __init__(self, spec: ModelSpec, mp_degree: int = 1, mp_rank: int = 0, kernels: Kernels = Kernels(),
                 sequence_parallel: bool = False):
        super().__init__()
        self.spec, self.kernels = spec, kernels
        linears = Linears(mp_degree, sequence_parallel)
        self.sequence_parallel = linears.sequence_parallel
        self.embedding = Embedding(spec, linears, kernels)
        self.blocks = nn.LayerList([Block(spec, linears, kernels) for _ in range(spec.n_layer)])
        self.head = LMHead(spec, linears, kernels, self.embedding.wte if spec.tie_embeddings else None)
        self.loss = TokenLoss(mp_degree)
        self.position = PositionContext(spec, mp_degree, mp_rank)
        self.recompute_every = 0  # set by the trainer: recompute every k-th block's activations

    def run_blocks(self, x):
        """[b, t, d_model] in; out the same, or under sequence parallelism this rank's [t/tp, b, d_model] slice."""
        bias = self.position.bias(x.shape[1], x.dtype, self.kernels.flash_attention)
        if self.sequence_parallel:
            x = scatter_sequence(x)
        for number, block in enumerate(self.blocks):
            if self.recompute_every and number % self.recompute_every == 0 and self.training:
                from paddle.distributed.fleet.utils import recompute
                # A frozen base (LoRA) gives the first block an input that needs no gradient: the reentrant
                # (PyLayer) recompute would then skip the block's backward, adapters included.
                x = recompute(block, x, self.position.rotary, bias, use_reentrant=not x.stop_gradient)
            else:
                x = block(x, self.position.rotary, bias)
        return x

    def forward(self, idx, targets):
        """The summed loss over supervised positions of this micro-batch."""
        logits = self.head.logits(self.run_blocks(self.embedding(idx)))
        return self.loss(logits, targets)

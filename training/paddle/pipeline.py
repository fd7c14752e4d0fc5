"""The Paddle model as a fleet ``PipelineLayer``: embedding, blocks and head as pipe layers.

Blocks are split evenly across stages (``seg_method="layer:BlockPipe"``); the
embedding sits on the first stage and the head on the last. Tied embeddings
are a ``SharedLayerDesc`` held by both end stages, whose gradients fleet sums
across them, as in PaddleNLP's GPT. Micro-batches are
``train.gradient_accumulation_steps`` (fleet's ``accumulate_steps``), run 1F1B.
Recompute is fleet's ``recompute_interval``, which needs a ``recompute_ctx``.
"""
from __future__ import annotations

import functools

import paddle
from paddle import nn

from training.paddle.model import (Block, Embedding, Kernels, LMHead, Linears, PositionContext, TokenLoss, _norm,
                                   replicated_input)
from training.contract.spec import WorkloadSpec


class EmbeddingPipe(Embedding):
    @property
    def weight(self):  # what SharedLayerDesc ties: the token embedding
        return self.wte.weight


class BlockPipe(nn.Layer):
    def __init__(self, spec, mp_degree: int, mp_rank: int, kernels: Kernels, index: int):
        super().__init__()
        self.index, self.kernels = index, kernels
        self.block = Block(spec, Linears(mp_degree), kernels)
        self.position = PositionContext(spec, mp_degree, mp_rank)

    def forward(self, x):
        return self.block(x, self.position.rotary, self.position.bias(x.shape[1], x.dtype,
                                                                      self.kernels.flash_attention))


class FinalNormPipe(nn.Layer):
    def __init__(self, spec, kernels: Kernels):
        super().__init__()
        self.ln_f = _norm(spec, kernels)

    def forward(self, x):
        return self.ln_f(x)


class HeadPipe(LMHead):
    """Untied head: final norm and the LM head's logits (the loss is fleet's loss_fn)."""

    def forward(self, x):
        return self.logits(x)


def tied_logits(mp_degree: int, embedding: EmbeddingPipe, x):
    """The last stage's use of the shared embedding: logits against its weight (this rank's vocabulary)."""
    return paddle.matmul(replicated_input(x, mp_degree), embedding.weight, transpose_y=True)


class PipeLoss(nn.Layer):
    """Mean cross entropy of a micro-batch (fleet averages it over the micro-batches of a step)."""

    def __init__(self, mp_degree: int):
        super().__init__()
        self.token_loss = TokenLoss(mp_degree)

    def forward(self, logits, targets):
        return self.token_loss(logits, targets) / float(targets.numel())


def pipeline_model(spec: WorkloadSpec, layout, kernels: Kernels):
    """(PipelineLayer, canonical (name, parameter) pairs of this stage for ``weights.load``)."""
    from paddle.distributed import fleet
    from paddle.distributed.fleet.meta_parallel import LayerDesc, PipelineLayer, SharedLayerDesc

    model_spec, tp, tp_rank = spec.model, layout.tp, layout.tp_rank
    linears = Linears(tp)
    descs = []
    if model_spec.tie_embeddings:
        descs.append(SharedLayerDesc("embed", EmbeddingPipe, shared_weight_attr="weight",
                                     spec=model_spec, linears=linears, kernels=kernels))
    else:
        descs.append(LayerDesc(EmbeddingPipe, spec=model_spec, linears=linears, kernels=kernels))
    descs += [LayerDesc(BlockPipe, spec=model_spec, mp_degree=tp, mp_rank=tp_rank, kernels=kernels, index=i)
              for i in range(model_spec.n_layer)]
    if model_spec.tie_embeddings:
        descs += [LayerDesc(FinalNormPipe, spec=model_spec, kernels=kernels),
                  SharedLayerDesc("embed", EmbeddingPipe, forward_func=functools.partial(tied_logits, tp),
                                  shared_weight_attr="weight",
                                  spec=model_spec, linears=linears, kernels=kernels)]
    else:
        descs.append(LayerDesc(HeadPipe, spec=model_spec, linears=linears, kernels=kernels))
    recompute = {"none": 0, "full": 1}.get(spec.train.recompute, spec.train.recompute_every)
    hcg = fleet.get_hybrid_communicate_group()
    model = PipelineLayer(layers=descs, num_stages=layout.pp, topology=hcg.topology(),
                          loss_fn=PipeLoss(tp), seg_method="layer:BlockPipe",
                          recompute_interval=recompute, recompute_ctx=recompute_context(hcg) if recompute else None)
    return model, list(_canonical_parameters(model))


def recompute_context(hcg) -> dict:
    """What fleet's ``recompute_hybrid`` needs under ``recompute_interval`` (PipelineLayer asserts it is given).

    The model-parallel group is where ``partition`` would split the saved activations, as in PaddleNLP;
    activations are neither split nor offloaded to host memory here, so recompute costs compute only.
    """
    return {"mp_group": hcg.get_model_parallel_group(), "offload": False, "partition": False}


def _canonical_parameters(model):
    """This stage's parameters under the names of ``training/torch/model.py``."""
    seen = set()
    for layer in model.sublayers():
        if isinstance(layer, BlockPipe):
            prefix, params = f"blocks.{layer.index}.", layer.block.named_parameters()
        elif isinstance(layer, (EmbeddingPipe, FinalNormPipe, HeadPipe)):
            prefix, params = "", layer.named_parameters()
        else:
            continue
        for name, param in params:
            if id(param) not in seen:
                seen.add(id(param))
                yield prefix + name, param

"""Pipeline parallelism with ``torch.distributed.pipelining``: stages built by hand, no tracing.

Every rank builds the whole model on the meta device (no memory), keeps its
stages' modules and materialises only those (``training.torch.init``: each
parameter from its own seed), so each device holds only its stages' layers and
the pipeline starts from exactly the weights one process would. Layers are
split evenly (the first stages take the remainder); stage ``s`` lives on
pipeline rank ``s % pp`` (interleaved: several stages per rank).

Tied embeddings (GPT-2) are untied Megatron-style: the last stage gets its own
copy of the token embedding as LM head, and after each step the two copies'
gradients are summed over a two-rank group, so both get the update of the one
shared weight.

The micro-batches of a step are the step's gradient-accumulation micro-batches.
The schedule's own 1/n_microbatches gradient scaling is off: the loss handed to
it is already each micro-batch's share of the global mean (see ``train.py``).
Shapes are inferred on the first step and fixed from then on, so instruction
batches are padded to the full sequence length under pipeline parallelism.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from training.contract.spec import ModelSpec, WorkloadSpec
from training.torch.init import name_as
from training.torch.model import GPT, TransformerPart, lm_loss


class PipelineStageModule(TransformerPart):
    def __init__(self, model: GPT, layers: range, first: bool, last: bool):
        super().__init__()
        spec = self.spec = model.spec
        self.wte = model.wte if first else None
        self.wpe = model.wpe if first else None
        self.emb_norm = model.emb_norm if first else None
        self.blocks = nn.ModuleList(model.blocks[i] for i in layers)
        self.ln_f = model.ln_f if last else None
        self.lm_head = None
        if last:
            self.lm_head = model.lm_head
            if spec.tie_embeddings:  # its own copy, kept equal to stage 0's through summed gradients
                self.lm_head = nn.Linear(spec.d_model, spec.vocab_size, bias=False, device=model.wte.weight.device)
                self.lm_head.weight.requires_grad_(model.wte.weight.requires_grad)
                name_as(self.lm_head, "wte")  # starts from the embedding's values
        self._register_position_buffers(model.wte.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.wte is not None:
            x = self.embed(x)
        x = self.run_blocks(x)
        return self.head(x) if self.lm_head is not None else x

    @property
    def tied_copy(self) -> nn.Parameter | None:
        """This stage's half of a tied embedding pair, if it holds one."""
        if not self.spec.tie_embeddings:
            return None
        if self.wte is not None:
            return self.wte.weight
        return self.lm_head.weight if self.lm_head is not None else None


def split_layers(n_layer: int, n_stages: int) -> list[range]:
    base, extra = divmod(n_layer, n_stages)
    bounds, start = [], 0
    for stage in range(n_stages):
        end = start + base + (stage < extra)
        bounds.append(range(start, end))
        start = end
    return bounds


class Pipeline:
    """This rank's stages, their schedule, and the tied-embedding gradient sum."""

    def __init__(self, model: GPT, spec: WorkloadSpec, pp_group, pp_rank: int, dp_rank: int, dp_size: int,
                 device: torch.device, prepare: Callable[[PipelineStageModule], None]):
        from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                                  ScheduleInterleaved1F1B)

        par = spec.parallel
        pp = self.size = par.pipeline_parallel_degree
        n_stages = pp * par.stages_per_rank
        self.spec: ModelSpec = spec.model
        self.stage_ids = [s for s in range(n_stages) if s % pp == pp_rank]
        self.has_first, self.has_last = 0 in self.stage_ids, n_stages - 1 in self.stage_ids
        bounds = split_layers(spec.model.n_layer, n_stages)
        # Build every stage before preparing any (sharding, then materialising): sharding swaps parameters
        # in place. The other stages' modules stay on the meta device and go with ``model``.
        self.modules = [PipelineStageModule(model, bounds[s], s == 0, s == n_stages - 1) for s in self.stage_ids]
        for module in self.modules:
            prepare(module)
        stages = [PipelineStage(m, s, n_stages, device, group=pp_group) for m, s in zip(self.modules, self.stage_ids)]
        self.stages = stages  # the time breakdown times their chunks (training/torch/breakdown_pp.py)
        self.micro_batches = spec.train.gradient_accumulation_steps
        common = {"n_microbatches": self.micro_batches, "loss_fn": self._loss, "scale_grads": False}
        self._scale, self._scaler, self._losses = 1.0, None, []
        # The time breakdown's hooks (training/torch/breakdown_pp.py): the loss timed as compute, the tied
        # embedding's all-reduce timed as communication; plain calls otherwise.
        self.loss_clock: Callable = _call
        if par.pipeline_schedule == "interleaved":
            self.schedule = ScheduleInterleaved1F1B(stages, **common)
        else:
            (stage,) = stages
            self.schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[par.pipeline_schedule](stage, **common)
        self.tie_group = self._tie_group(pp, n_stages, dp_rank, dp_size) if spec.model.tie_embeddings else None
        self.pp_group, self.device = pp_group, device
        self.reduce_tied: Callable[[torch.Tensor], None] = lambda t: dist.all_reduce(t, group=self.tie_group)

    @staticmethod
    def _tie_group(pp: int, n_stages: int, dp_rank: int, dp_size: int):
        """Stage 0's and the last stage's ranks in this replica (every rank creates every replica's group)."""
        first, last = 0 % pp, (n_stages - 1) % pp
        if first == last:
            return None  # both halves on one rank: summed locally
        mine = None
        for replica in range(dp_size):
            group = dist.new_group([replica * pp + first, replica * pp + last])
            mine = group if replica == dp_rank else mine
        return mine

    def parameters(self) -> list[nn.Parameter]:
        return [p for m in self.modules for p in m.parameters()]

    def _loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss_clock(self._scaled_loss, logits, targets)

    def _scaled_loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = lm_loss(logits, targets, reduction="sum") * self._scale
        self._losses.append(loss.detach())
        return self._scaler.scale(loss)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, scale: float, scaler) -> torch.Tensor:
        """Forward and backward over the step's micro-batches (concatenated along the batch); the summed
        loss on the last stage, zero elsewhere."""
        self._scale, self._scaler, self._losses = scale, scaler, []
        if not self.has_last:  # the loss (and so scaler.scale) is on the last stage; every rank's scaler steps
            scaler.scale(torch.zeros((), device=inputs.device))
        # return_outputs=False: the last stage would otherwise keep every micro-batch's logits (micro batch x
        # seq_len x vocab each, 0.8 GB for GPT-2 at 4 x 1024 in fp32) and concatenate them, for nothing: the
        # loss is taken inside the schedule
        self.schedule.step(*((inputs,) if self.has_first else ()), target=targets if self.has_last else None,
                           return_outputs=False)
        self._sum_tied_gradients()
        # The first step's shape inference may call the loss once more: the step's are the last ones.
        losses = self._losses[-self.micro_batches:]
        return torch.stack(losses).sum() if losses else torch.zeros((), device=inputs.device)

    def _sum_tied_gradients(self) -> None:
        halves = [m.tied_copy for m in self.modules if m.tied_copy is not None]
        grads = [_local(p.grad) for p in halves if p.grad is not None]
        if len(grads) == 2:
            total = grads[0] + grads[1]
            for g in grads:
                g.copy_(total)
        elif grads and self.tie_group is not None:
            self.reduce_tied(grads[0])

    def squared_grad_norm(self) -> torch.Tensor:
        """Over the whole pipeline, each tied weight counted once (the last stage's copy is left out)."""
        skip = {id(m.lm_head.weight) for m in self.modules if m.lm_head is not None and m.tied_copy is not None}
        grads = [p.grad for p in self.parameters() if p.grad is not None and id(p) not in skip]
        total = squared_norm(grads, self.device)
        dist.all_reduce(total, group=self.pp_group)
        return total


def _call(fn: Callable, *args):
    return fn(*args)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def squared_norm(grads: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Sum of squares of the full gradients, in float64 (sharded DTensors are reduced across their shards).
    A plain tensor's norm is one fused float64 reduction: a float64 copy and its square, each the gradient's
    size, took ~9 ms of every 2-rank gpt2_tiny step (n_layer 4, d_model 256) on a CPU, outside the timed step."""
    total = torch.zeros((), device=device, dtype=torch.float64)
    for g in grads:
        if hasattr(g, "full_tensor"):  # a DTensor: its shards' squares reduced as DTensor does
            part = g.double().pow(2).sum()
            total += part.full_tensor()
        else:
            total += torch.linalg.vector_norm(g, dtype=torch.float64).square()
    return total

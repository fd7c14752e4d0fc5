"""The collectives a layout runs per step by construction, for layouts whose workers cannot time them one by
one (training/torch/breakdown.py and training/paddle/train.py say why): their expected communication comes
from the model's shapes instead of the workers' records.

Tensor parallel (Megatron-LM's layout, which both workers follow): per transformer block and micro-batch, the
attention and the MLP each end in a row-parallel projection whose output is all-reduced in forward, and each
begins in a column-parallel projection whose input gradient is all-reduced in backward: 4 all-reduces of the
activations, micro_batch_size x seq_len x d_model elements in the activation dtype. With sequence parallelism
each all-reduce becomes a reduce-scatter and an all-gather of the same tensor (8 per block). The embeddings, the
final norm and the head are not counted (torch keeps them replicated; Paddle's vocab-parallel embedding and
loss add one all-reduce each, left out here and said so).
"""
from __future__ import annotations

from typing import Optional

ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}  # fp8 runs its activations between GEMMs in bf16
TP_FORMULA = ("tensor parallel: 4 all-reduces per block and micro-batch (2 forward, 2 backward) of micro_batch_size x "
              "seq_len x d_model activations (sequence parallel: a reduce-scatter and an all-gather each); "
              "embeddings and head not counted")


def tensor_parallel(workload, world_size: int) -> Optional[tuple[list[tuple[str, int]], int, str]]:
    """(collectives as (op, bytes), group size, formula) of a tensor-parallel-only layout's step; None for any
    other layout (pipeline stages, or data parallelism beside TP, whose gradient collectives this leaves out)."""
    par, model, train = workload.parallel, workload.model, workload.train
    tp = par.tensor_parallel_degree
    if tp <= 1 or par.pipeline_parallel_degree > 1 or par.data_degree(world_size) != 1:
        return None
    nbytes = train.micro_batch_size * model.seq_len * model.d_model * ACTIVATION_BYTES.get(train.precision, 4)
    per_block = ["reducescatter", "allgather"] * 4 if par.sequence_parallel else ["allreduce"] * 4
    ops = per_block * model.n_layer * train.gradient_accumulation_steps
    return [(op, nbytes) for op in ops], tp, TP_FORMULA

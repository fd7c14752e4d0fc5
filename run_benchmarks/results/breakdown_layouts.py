"""The collectives a layout runs per step, worked out from the model's shapes. They price the expected
communication only where the workers' breakdown records have no measured part: Paddle's tensor parallel
(fleet's layers, training/paddle/breakdown.py) and a torch tensor-parallel round that was not measured
(``train.breakdown_steps`` 0, or CUDA graphs: training/torch/breakdown_tp.py). A measured torch round is
priced from the collectives its workers recorded (run_benchmarks/results/breakdown.py).

Tensor parallel, as both workers build it: per transformer block and micro-batch, the attention and the MLP
each end in a row-parallel projection whose output is all-reduced in forward (2). Each column-parallel
projection (q, k, v, fc, and gate with swiglu) all-reduces its input's gradient in backward. Torch's
``ColwiseParallel`` and Paddle's ``ColumnParallelLinear`` each do this for their own input, so that is 4 (5
with swiglu). All of these are activations of micro_batch_size x seq_len x d_model elements in the
activation dtype: 6 all-reduces per block, 7 with swiglu. Megatron-LM's fused QKV and fc projections make
that 4. With sequence parallelism the block's input is all-gathered once for the column-parallel
projections, and each row-parallel output is reduce-scattered instead. That is 2 all-gathers and 2
reduce-scatters in forward and as many in backward, 8 per block, each of the same tensor.

Left out: the embeddings, the final norm and the head. Torch keeps them replicated; Paddle's
vocab-parallel embedding and loss add an all-reduce each. Also left out are torch's extras under sequence
parallelism, which tests/test_breakdown_tp.py measures: the last block's output all-gathered for the final
norm and the first block's input gradient all-gathered, 2 per micro-batch, and the optimizer step's
all-reduces of the norms' Partial gradients (d_model elements each).
"""
from __future__ import annotations

from typing import Optional

ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}  # fp8 runs its activations between GEMMs in bf16
TP_FORMULA = ("tensor parallel: per block and micro-batch 2 all-reduces in forward and one in backward per "
              "column-parallel projection (q, k, v, fc, gate with swiglu) of micro_batch_size x seq_len x d_model "
              "activations (sequence parallel: 2 all-gathers and 2 reduce-scatters each way); embeddings and "
              "head not counted")


def column_projections(model) -> int:
    """Column-parallel projections per block: q, k, v, fc, and gate with swiglu."""
    return 5 if model.activation == "swiglu" else 4


def tensor_parallel(workload, world_size: int) -> Optional[tuple[list[tuple[str, int]], int, str]]:
    """(collectives as (op, bytes), group size, formula) of a tensor-parallel-only layout's step; None for any
    other layout (pipeline stages, or data parallelism beside TP, whose gradient collectives this leaves out)."""
    par, model, train = workload.parallel, workload.model, workload.train
    tp = par.tensor_parallel_degree
    if tp <= 1 or par.pipeline_parallel_degree > 1 or par.data_degree(world_size) != 1:
        return None
    nbytes = train.micro_batch_size * model.seq_len * model.d_model * ACTIVATION_BYTES.get(train.precision, 4)
    if par.sequence_parallel:
        per_block = ["allgather", "reducescatter"] * 4
    else:
        per_block = ["allreduce"] * (2 + column_projections(model))
    ops = per_block * model.n_layer * train.gradient_accumulation_steps
    return [(op, nbytes) for op in ops], tp, TP_FORMULA

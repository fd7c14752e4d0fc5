"""The collectives a layout runs per step, worked out from the model's shapes. They price the expected
communication only where the workers' breakdown records have no measured part: a tensor-parallel round that
was not measured (``train.breakdown_steps`` 0; torch under CUDA graphs: training/torch/breakdown_tp.py; Paddle
on an accelerator, whose loss kernel all-reduces in C++: training/paddle/breakdown.py). A measured round is
priced from the collectives its workers recorded (run_benchmarks/results/breakdown/step.py).

Tensor parallel, as both workers build it: per transformer block and micro-batch, the attention and the MLP
each end in a row-parallel projection whose output is all-reduced in forward (2). Each column-parallel
projection (q, k, v, fc, and gate with swiglu) all-reduces its input's gradient in backward. Torch's
``ColwiseParallel`` and Paddle's ``ColumnParallelLinear`` each do this for their own input, so that is 4 (5
with swiglu). All of these are activations of micro_batch_size x seq_len x d_model elements in the
activation dtype: 6 all-reduces per block, 7 with swiglu. Megatron-LM's fused QKV and fc projections make
that 4. With sequence parallelism the block's input is all-gathered once for the column-parallel
projections, and each row-parallel output is reduce-scattered instead. That is 2 all-gathers and 2
reduce-scatters in forward and as many in backward, 8 per block, each of the same tensor.

Left out for torch: the embeddings, the final norm and the head, which it keeps replicated, and its extras
under sequence parallelism, which tests/test_breakdown_tp.py measures: the last block's output all-gathered
for the final norm and the first block's input gradient all-gathered, 2 per micro-batch, and the optimizer
step's all-reduces of the norms' Partial gradients (d_model elements each).

Paddle (``framework="paddle"``; training/paddle/model.py's layers, counted from a measured CPU round in
tests/test_paddle_breakdown_fleet_launch.py) has the same per-block count and adds per micro-batch: the
vocab-parallel embedding's all-reduce of its output in forward and the LM head's all-reduce of its input's
gradient in backward (``_c_identity``), both of the activation's size; under sequence parallelism also the
embeddings' scatter (an all-gather of its gradient in backward) and the final norm's gather (an all-gather in
forward); and the parallel cross-entropy's 3 all-reduces (the logits' max, the target logit, the sum of
exponentials) of micro_batch_size x seq_len fp32 values each. Left out for Paddle: the broadcasts fleet adds,
of each micro-batch's token ids over the tensor-parallel group (``TensorParallel``'s ``broadcast_input_data``)
and, after each optimizer step, of every replicated parameter whose name holds ``embedding``, ``layer_norm`` or
``.b_`` (``mp_configs.sync_param``, on by default), and sequence parallelism's all-reduces of the norms' and
row biases' gradients once per step.
"""
from __future__ import annotations

from typing import Optional

ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}  # fp8 runs its activations between GEMMs in bf16
TP_FORMULA = ("tensor parallel: per block and micro-batch 2 all-reduces in forward and one in backward per "
              "column-parallel projection (q, k, v, fc, gate with swiglu) of micro_batch_size x seq_len x d_model "
              "activations (sequence parallel: 2 all-gathers and 2 reduce-scatters each way); embeddings and "
              "head not counted")
PADDLE_FORMULA = ("; paddle adds per micro-batch the vocab-parallel embedding's all-reduce and the LM head's "
                  "input-gradient all-reduce of the same activations (sequence parallel: and an all-gather each for "
                  "the embeddings' scatter and the final norm's gather) and the parallel cross-entropy's 3 "
                  "all-reduces of micro_batch_size x seq_len x 4 bytes; fleet's broadcasts of the token ids and of "
                  "replicated parameters not counted")
# Paddle's per micro-batch collectives outside the blocks, of the activation's size: (sequence parallel?) -> ops
PADDLE_EDGES = {False: ("allreduce", "allreduce"), True: ("allreduce", "allgather", "allgather", "allreduce")}
PADDLE_LOSS_ALLREDUCES = 3  # c_softmax_with_cross_entropy: max, target logit, sum of exponentials


def column_projections(model) -> int:
    """Column-parallel projections per block: q, k, v, fc, and gate with swiglu."""
    return 5 if model.activation == "swiglu" else 4


def tensor_parallel(workload, world_size: int,
                    framework: str = "torch") -> Optional[tuple[list[tuple[str, int]], int, str]]:
    """(collectives as (op, bytes), group size, formula) of a tensor-parallel-only layout's step; None for any
    other layout (pipeline stages, or data parallelism beside TP, whose gradient collectives this leaves out).
    ``framework``: paddle adds its embedding's, head's and loss's collectives (see the module docstring)."""
    par, model, train = workload.parallel, workload.model, workload.train
    tp = par.tensor_parallel_degree
    if tp <= 1 or par.pipeline_parallel_degree > 1 or par.data_degree(world_size) != 1:
        return None
    nbytes = train.micro_batch_size * model.seq_len * model.d_model * ACTIVATION_BYTES.get(train.precision, 4)
    if par.sequence_parallel:
        per_block = ["allgather", "reducescatter"] * 4
    else:
        per_block = ["allreduce"] * (2 + column_projections(model))
    micro = [(op, nbytes) for op in per_block * model.n_layer]
    if framework != "paddle":
        return micro * train.gradient_accumulation_steps, tp, TP_FORMULA
    micro += [(op, nbytes) for op in PADDLE_EDGES[par.sequence_parallel]]
    micro += [("allreduce", train.micro_batch_size * model.seq_len * 4)] * PADDLE_LOSS_ALLREDUCES
    return micro * train.gradient_accumulation_steps, tp, TP_FORMULA + PADDLE_FORMULA

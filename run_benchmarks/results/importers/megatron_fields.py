"""Field tables of Megatron-LM (and Megatron-Core's training loop) and of Megatron-DeepSpeed, from their printing code.

Megatron-LM's ``training_log`` prints every ``--log-interval`` iterations one ``|``-separated line of means over
the iterations since its previous line (its timers and loss sums are reset after each line); since 2025 it also
prints a line after the first iteration without resetting them, so the next line still averages iteration 1.
``report_memory`` prints the allocator's counters in MB (bytes / 2**20) from each data-parallel rank 0, with a
``[Rank N]`` prefix. ``_print_args`` prints every argument at the start as ``name ....... value``.
Megatron-DeepSpeed's ``training_log`` adds its own samples/s, tokens/s per GPU and TFLOP/s (with the
activation-recompute factor in its FLOP count) and the sequence length each iteration trained.
"""
from __future__ import annotations

from run_benchmarks.results.importers.fields import Field, FieldTable

LM = "NVIDIA/Megatron-LM megatron/training/training.py"
LM_MEMORY = "NVIDIA/Megatron-LM megatron/training/utils.py"
LM_ARGS = "NVIDIA/Megatron-LM megatron/training/arguments.py"
DS = "microsoft/Megatron-DeepSpeed megatron/training.py"
DS_UTILS = "microsoft/Megatron-DeepSpeed megatron/utils.py"
MIB = float(1 << 20)


def _common(source: str, memory: str) -> tuple[Field, ...]:
    return (
        Field("elapsed time per iteration (ms)", "step_time_s", "ms", 1e-3, "job", "interval", source,
              "the interval's time / its iterations (advanced and skipped)"),
        Field("global batch size", "global_batch", "samples", 1, "job", "step", source),
        Field("consumed samples", "consumed_samples", "samples", 1, "job", "run", source),
        Field("learning rate", "learning_rate", "", 1, "job", "step", source),
        Field("lm loss", "loss", "", 1, "job", "interval", source, "mean over the interval's advanced iterations"),
        Field("loss scale", "loss_scale", "", 1, "job", "step", source),
        Field("grad norm", "grad_norm", "", 1, "job", "step", source),
        Field("number of skipped iterations", "skipped_iterations", "iterations", 1, "job", "interval", source,
              "iterations whose optimizer step the loss scaler skipped"),
        Field("number of nan iterations", "nan_iterations", "iterations", 1, "job", "interval", source),
        Field("max allocated", "memory_allocated_peak", "MB (2**20 bytes)", MIB, "device", "peak since start", memory),
        Field("max reserved", "memory_reserved_peak", "MB (2**20 bytes)", MIB, "device", "peak since start", memory),
        Field("allocated", "memory_allocated", "MB (2**20 bytes)", MIB, "device", "instant", memory),
        Field("reserved", "memory_reserved", "MB (2**20 bytes)", MIB, "device", "instant", memory),
    )


MEGATRON = FieldTable("megatron", "Megatron-LM and Megatron-Core (training_log, report_memory)", _common(LM, LM_MEMORY) + (
    Field("throughput per GPU (TFLOP/s/GPU)", "tflops_per_device", "TFLOP/s", 1, "device", "interval", LM,
          "Megatron's own FLOP count (num_floating_point_operations)"),
    Field("log_interval", "log_interval", "iterations", 1, "job", "setting", LM_ARGS),
    Field("seq_length", "seq_len", "tokens", 1, "job", "setting", LM_ARGS),
), first_report_resets=False, evaluation="validation loss at iteration")

MEGATRON_DEEPSPEED = FieldTable("megatron-deepspeed", "Megatron-DeepSpeed (training_log, throughput_calculator)",
                                _common(DS, DS_UTILS) + (
    Field("samples per second", "samples_per_s", "samples/s", 1, "job", "interval", DS_UTILS,
          "global batch / the interval's time per iteration"),
    Field("tokens per gpu per second (tgs)", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval", DS,
          "samples/s x the sequence length / all devices"),
    Field("TFLOPs", "tflops_per_device", "TFLOP/s", 1, "device", "interval", DS_UTILS,
          "its own FLOP count, x4/3 with activation checkpointing (hardware FLOPs)"),
    Field("actual seqlen", "seq_len", "tokens", 1, "job", "step", DS),
    Field("log_interval", "log_interval", "iterations", 1, "job", "setting", "microsoft/Megatron-DeepSpeed "
                                                                             "megatron/arguments.py"),
), first_report_resets=True, evaluation="validation loss at iteration")

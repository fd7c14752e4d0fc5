"""Field tables of NeMo 1 (its Lightning progress bar) and NeMo 2 (its ProgressPrinter lines), from their code.

NeMo 1 shows its logged values in the tqdm progress bar's postfix (``key=value``, 3 significant digits), one
refresh per step (``\\r``-separated in a log file): ``train_step_timing in s`` is the TimingCallback's time of the
last step (or its mean over its last ``buffer_size`` steps). NeMo 2's ProgressPrinter prints every
``log_interval`` steps ``Training epoch E, iteration N/M | key: value | ...`` with every metric averaged over the
interval (``global_step`` excepted), 4 significant digits. The memory figures appear with
``NEMO_LOG_MEMORY_USAGE=1``; the TFLOP/s with the FLOPsMeasurementCallback.
"""
from __future__ import annotations

from run_benchmarks.results.importers.fields import Field, FieldTable

TIMING = "NVIDIA/NeMo nemo/utils/exp_manager.py"
GPT1 = "NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py"
CONFIG1 = "NVIDIA/NeMo examples/nlp/language_modeling/megatron_gpt_pretraining.py"
PRINTER = "NVIDIA/NeMo nemo/lightning/pytorch/callbacks/progress_printer.py"
STRATEGY = "NVIDIA/NeMo nemo/lightning/pytorch/strategies/megatron_strategy.py"
SAMPLER = "NVIDIA/NeMo nemo/lightning/pytorch/plugins/data_sampler.py"
FLOPS = "NVIDIA/NeMo nemo/lightning/pytorch/callbacks/flops_callback.py"
MEMORY = "NVIDIA/NeMo nemo/lightning/pytorch/callbacks/memory_callback.py"

NEMO1 = FieldTable("nemo1", "NeMo 1 (Lightning progress bar of the Megatron GPT model)", (
    Field("train_step_timing in s", "step_time_s", "s", 1, "job", "step", TIMING,
          "the last step's time, or the mean of the timer's last buffer_size steps"),
    Field("reduced_train_loss", "loss", "", 1, "job", "step", GPT1),
    Field("consumed_samples", "consumed_samples", "samples", 1, "job", "run", GPT1),
    Field("peak_memory_usage", "memory_reserved_peak", "bytes", 1, "device", "peak since start", GPT1,
          "torch.cuda.max_memory_reserved, with NEMO_LOG_MEMORY_USAGE=1"),
    Field("memory_allocated", "memory_allocated", "bytes", 1, "device", "instant", GPT1),
    Field("global_batch_size", "global_batch", "samples", 1, "job", "setting", CONFIG1, "the config it prints"),
    Field("encoder_seq_length", "seq_len", "tokens", 1, "job", "setting", CONFIG1, "the config it prints"),
), evaluation="Validation")

NEMO2 = FieldTable("nemo2", "NeMo 2 (ProgressPrinter lines)", (
    Field("train_step_timing in s", "step_time_s", "s", 1, "job", "interval", TIMING,
          "ProgressPrinter's mean over its log interval"),
    Field("reduced_train_loss", "loss", "", 1, "job", "interval", STRATEGY),
    Field("global_batch_size", "global_batch", "samples", 1, "job", "interval", SAMPLER),
    Field("consumed_samples", "consumed_samples", "samples", 1, "job", "interval", SAMPLER),
    Field("TFLOPS_per_GPU", "tflops_per_device", "TFLOP/s", 1, "device", "interval", FLOPS,
          "NeMo's own FLOPs formula for the named model / the mean step time"),
    Field("tflops_per_sec_per_gpu", "tflops_per_device", "TFLOP/s", 1, "device", "interval", FLOPS,
          "the older name"),
    Field("peak_memory_usage", "memory_reserved_peak", "bytes", 1, "device", "peak since start", STRATEGY,
          "torch.cuda.max_memory_reserved, with NEMO_LOG_MEMORY_USAGE=1"),
    Field("memory_allocated", "memory_allocated", "bytes", 1, "device", "instant", STRATEGY),
    Field("memory/peak_allocated_mem", "memory_allocated_peak", "GB (1e9 bytes)", 1e9, "device", "peak since start",
          MEMORY, "the MemoryMonitor callback"),
    Field("memory/peak_reserved_mem", "memory_reserved_peak", "GB (1e9 bytes)", 1e9, "device", "peak since start",
          MEMORY, "the MemoryMonitor callback"),
), evaluation="Validation")

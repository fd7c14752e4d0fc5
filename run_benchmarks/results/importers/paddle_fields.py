"""Field tables of the PaddleNLP Trainer (2022 to today), the PaddleFormers Trainer and ERNIEKit, from their code.

The Trainer logs every ``logging_steps`` steps one ``key: value, ...`` line (``speed_metrics("interval", ...)``:
the interval's runtime, samples/s and steps/s; tokens/s per device and hardware TFLOP/s for pretraining), and
prints its arguments at the start (``print_config``: ``name   : value``). What ``interval_samples_per_second``
counts changed: the 2022 Trainer (``trainer_base.py``) divides one step's samples on one device by the whole
interval's time, later ones the job's samples over the interval. Its hardware TFLOP/s divides by 2**40.
ERNIEKit's trainer logs the same interval under ``global_`` names, with its own tokens and TFLOP/s per card.
The older model-zoo scripts print ``global step N, ..., speed: X step/s, ips: Y tokens/s``.
"""
from __future__ import annotations

from run_benchmarks.results.importers.fields import Field, FieldTable

GIB, MIB, TIB = float(1 << 30), float(1 << 20), float(1 << 40)
NLP = "PaddlePaddle/PaddleNLP"


def _trainer(repo: str, package: str) -> tuple[Field, ...]:
    trainer, utils = f"{repo} {package}/trainer/trainer.py", f"{repo} {package}/trainer/trainer_utils.py"
    args = f"{repo} {package}/trainer/training_args.py"
    return (
        Field("loss", "loss", "", 1, "job", "interval", trainer, "the interval's mean of the ranks' mean loss"),
        Field("learning_rate", "learning_rate", "", 1, "job", "step", trainer),
        Field("interval_runtime", "interval_s", "s", 1, "job", "interval", utils),
        Field("interval_samples_per_second", "samples_per_s", "samples/s", 1, "job", "interval", utils,
              "the job's samples over the interval / its time; the 2022 Trainer (paddlenlp/trainer/trainer_base.py) "
              "divided one step's samples on one device by the whole interval's time"),
        Field("interval_steps_per_second", "steps_per_s", "steps/s", 1, "job", "interval", utils),
        Field("interval_tokens_per_second_per_device", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval",
              utils, "samples/s x seq_length / all devices (pretraining)"),
        Field("interval_hardware_tflops_per_device", "tflops_per_device", "TFLOP/s of 2**40 FLOP", TIB / 1e12,
              "device", "interval", utils, "the model's hardware FLOPs per token (recompute included) x tokens/s"),
        Field("max_memory_allocated", "memory_allocated_peak", "GiB", GIB, "device", "peak since start", trainer),
        Field("max_memory_reserved", "memory_reserved_peak", "GiB", GIB, "device", "peak since start", trainer),
        Field("current_memory_allocated", "memory_allocated", "GiB", GIB, "device", "instant", trainer),
        Field("current_memory_reserved", "memory_reserved", "GiB", GIB, "device", "instant", trainer),
        Field("gpu_max_memory_allocated", "memory_allocated_peak", "MB (2**20 bytes)", MIB, "device",
              "peak since start", trainer, "with skip_memory_metrics off"),
        Field("gpu_max_memory_reserved", "memory_reserved_peak", "MB (2**20 bytes)", MIB, "device",
              "peak since start", trainer, "with skip_memory_metrics off"),
        Field("logging_steps", "log_interval", "steps", 1, "job", "setting", args),
        Field("per_device_train_batch_size", "device_batch", "samples", 1, "device", "setting", args),
        Field("gradient_accumulation_steps", "accumulation", "micro-batches", 1, "device", "setting", args),
        Field("max_seq_length", "seq_len", "tokens", 1, "job", "setting", args, "or seq_length, max_seq_len"),
        Field("seq_length", "seq_len", "tokens", 1, "job", "setting", args),
    )


_OLD = f"{NLP} model_zoo/gpt/run_pretrain.py"
PADDLENLP = FieldTable("paddlenlp", "PaddleNLP Trainer (2022 to today) and the model-zoo scripts' global-step line",
                       _trainer(NLP, "paddlenlp") + (
    Field("speed", "steps_per_s", "steps/s", 1, "job", "interval", _OLD),
    Field("avg_batch_cost", "step_time_s", "s", 1, "job", "interval", _OLD),
    Field("ips (tokens/s)", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval", _OLD,
          "from the per-card batch"),
    Field("ips (seqs/s)", "samples_per_s_per_device", "samples/s", 1, "device", "interval", _OLD,
          "from the per-card batch"),
    Field("ips_total (tokens/s)", "tokens_per_s", "tokens/s", 1, "job", "interval", _OLD),
    Field("train_samples_per_second", "samples_per_s", "samples/s", 1, "job", "run", f"{NLP} paddlenlp/trainer/trainer.py",
          "the end-of-run summary: warm-up included, kept beside the interval means"),
    Field("train_loss", "loss", "", 1, "job", "run", f"{NLP} paddlenlp/trainer/trainer.py",
          "the run's mean loss, the final loss"),
    Field("Effective tokens per second", "tokens_per_s", "tokens/s", 1, "job", "run", f"{NLP} llm/run_finetune.py",
          "the fine-tuning script's benchmark mode: padding left out, whole run"),
), evaluation="eval_")

PADDLEFORMERS = FieldTable("paddleformers", "PaddleFormers Trainer",
                           _trainer("PaddlePaddle/PaddleFormers", "paddleformers"), evaluation="eval_")

_ERNIE = "PaddlePaddle/ERNIE erniekit/train/vl_sft/pretraining_trainer.py"
ERNIEKIT = FieldTable("erniekit", "ERNIEKit trainer (_maybe_log_save_evaluate)", (
    Field("loss", "loss", "", 1, "job", "interval", _ERNIE),
    Field("learning_rate", "learning_rate", "", 1, "job", "step", _ERNIE),
    Field("loss_scale", "loss_scale", "", 1, "job", "step", _ERNIE),
    Field("global_runtime", "interval_s", "s", 1, "job", "interval", _ERNIE),
    Field("global_samples_per_second", "samples_per_s", "samples/s", 1, "job", "interval", _ERNIE,
          "the job's samples over the interval / its time"),
    Field("global_steps_per_second", "steps_per_s", "steps/s", 1, "job", "interval", _ERNIE),
    Field("tokens_trained_current_step", "tokens_per_step", "tokens", 1, "job", "step", _ERNIE,
          "max_seq_len x the global batch: one step's, padded"),
    Field("tokens_per_sec_per_card", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval", _ERNIE,
          "tokens per step x steps/s / all devices"),
    Field("TFLOPS_per_sec_per_card", "tflops_per_device", "TFLOP/s", 1, "device", "interval", _ERNIE,
          "6 x trainable non-embedding parameters x tokens/s per card"),
    Field("max_mem_allocated_gb", "memory_allocated_peak", "GiB", GIB, "device", "peak since start", _ERNIE),
    Field("max_mem_reserved_gb", "memory_reserved_peak", "GiB", GIB, "device", "peak since start", _ERNIE),
    Field("mem_allocated_gb", "memory_allocated", "GiB", GIB, "device", "instant", _ERNIE),
    Field("mem_reserved_gb", "memory_reserved", "GiB", GIB, "device", "instant", _ERNIE),
    Field("logging_steps", "log_interval", "steps", 1, "job", "setting",
          "PaddlePaddle/PaddleFormers paddleformers/trainer/training_args.py"),
), evaluation="eval_")

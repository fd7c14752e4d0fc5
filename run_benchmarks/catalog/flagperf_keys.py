"""What each key of a FlagPerf/PaddleNLP extern config means to accelbench (docs/vendor-onboarding.md has the
table for readers).

Three kinds of key:

- **mapped**: the vendor's tuning (batch, accumulation, layout, recompute, precision, fused kernels) becomes
  accelbench's workload key, as the shipped YAML extern configs write it;
- **case**: the case owns it (steps, learning rate and the rest of the optimizer, seed, model shape; see
  "Fair comparison"): never applied, and reported with whether the run's own value agrees;
- **ignored**: no meaning in accelbench (checkpoints, evaluation, logging cadence, paths), each with why.

Any other key is refused with the nearest known one, so a typo never passes as "ignored".
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from run_benchmarks.catalog.flagperf_config import Assigned
from run_benchmarks.errors import UserError

Targets = dict[str, Any]  # dotted accelbench key -> value


def _flag(name: str, item: Assigned) -> bool:
    if isinstance(item.value, bool) or item.value in (0, 1):
        return bool(item.value)
    raise ValueError(f"{name} = {item.value!r}: expected True/False (or 1/0)")


def _same(target: str) -> Callable:
    return lambda name, item, _all: {target: item.value}


def _as_flag(target: str) -> Callable:
    return lambda name, item, _all: {target: _flag(name, item)}


def _degree(target: str, unset_means_default: bool = False) -> Callable:
    def convert(name, item, _all):  # PaddleNLP writes -1 for "not set"
        if item.value == -1:
            return {} if unset_means_default else {target: 1}
        return {target: item.value}
    return convert


def _sharding(name, item, _all) -> Targets:
    words = str(item.value).split() if isinstance(item.value, str) else None
    stages = [w for w in words or () if w in ("stage1", "stage2", "stage3")]
    if words is None or len(stages) > 1 or any(w not in ("stage1", "stage2", "stage3", "offload") for w in words):
        raise ValueError(f"sharding = {item.value!r}: expected one of 'stage1', 'stage2', 'stage3' (optionally "
                         "with ' offload'), or ''")
    out: Targets = {"parallel.sharding": stages[0] if stages else "none"}
    if "offload" in words:
        out["parallel.offload"] = True
    return out


def _precision(name, item, assigned) -> Targets:
    fp16 = _flag("fp16", assigned["fp16"]) if "fp16" in assigned else False
    bf16 = _flag("bf16", assigned["bf16"]) if "bf16" in assigned else False
    if fp16 and bf16:
        raise ValueError(f"fp16 (line {assigned['fp16'].line}) and bf16 (line {assigned['bf16'].line}) are both "
                         "on; choose one")
    return {"train.precision": "fp16" if fp16 else "bf16" if bf16 else "fp32"}


def _amp_level(name, item, _all) -> Targets:
    if item.value == "O0":
        raise ValueError("fp16_opt_level = 'O0' is no mixed precision at all: set fp16 = False (and bf16 = False) "
                         "instead")
    return {"train.amp_level": item.value}


def _recompute(name, item, assigned) -> Targets:
    if not _flag(name, item):
        return {"train.recompute": "none"}
    granularity = assigned["recompute_granularity"].value if "recompute_granularity" in assigned else "full"
    if granularity != "full":
        raise ValueError(f"recompute_granularity = {granularity!r}: accelbench recomputes whole blocks only "
                         "(PaddleNLP's 'full'); its 'core_attn' and 'full_attn' have no equivalent here")
    return {"train.recompute": "full"}


def _virtual_pp(name, item, _all) -> Targets:
    if item.value in (-1, 1):
        return {}
    return {"parallel.virtual_pipeline_degree": item.value, "parallel.pipeline_schedule": "interleaved"}


# FlagPerf/PaddleNLP key -> its accelbench key(s), from the value and the file's other keys.
MAPPED: dict[str, Callable[[str, Assigned, dict[str, Assigned]], Targets]] = {
    "per_device_train_batch_size": _same("train.micro_batch_size"),
    "gradient_accumulation_steps": _same("train.gradient_accumulation_steps"),
    "tensor_parallel_degree": _degree("parallel.tensor_parallel_degree"),
    "pipeline_parallel_degree": _degree("parallel.pipeline_parallel_degree"),
    "sharding_parallel_degree": _degree("parallel.sharding_parallel_degree", unset_means_default=True),
    "sharding_degree": _degree("parallel.sharding_parallel_degree", unset_means_default=True),
    "sharding": _sharding,
    "sequence_parallel": _as_flag("parallel.sequence_parallel"),
    "virtual_pp_degree": _virtual_pp,
    "recompute": _recompute,
    "use_flash_attention": _as_flag("train.fused_attention"),
    "use_fused_rms_norm": _as_flag("train.fused_norm"),
    "fp16": _precision,
    "bf16": _precision,
    "fp16_opt_level": _amp_level,
}
# Read only together with another key (recompute_granularity: with recompute on).
COMPANIONS = {"recompute_granularity": "recompute"}

_MODEL = "the case's model (the same shape for every vendor)"
_OPTIMIZER = ("the case's optimizer: AdamW at a constant train.lr, no learning-rate warm-up or decay, no clipping, "
              "loss scale 2^15 (throughput is comparable, convergence is not)")
_START = "the case's start: a random init from train.seed, or train.init_weights"
# Keys the case owns (fair comparison): the accelbench key the run's value is read from (None: accelbench has no
# such setting), and why it is the case's.
CASE: dict[str, tuple[Optional[str], str]] = {
    "max_steps": ("train.steps", "the case's step count; --set train.steps=N changes it for a run"),
    "learning_rate": ("train.lr", "the case's optimizer"),
    "weight_decay": ("train.weight_decay", "the case's optimizer"),
    "seed": ("train.seed", "the case's initialisation"),
    "max_seq_length": ("model.seq_len", _MODEL),
    "max_position_embeddings": ("model.seq_len", _MODEL),
    "hidden_size": ("model.d_model", _MODEL),
    "num_hidden_layers": ("model.n_layer", _MODEL),
    "num_attention_heads": ("model.n_head", _MODEL),
    "intermediate_size": ("model.d_ff", _MODEL),
    "vocab_size": ("model.vocab_size", _MODEL),
    **{key: (None, _OPTIMIZER) for key in (
        "min_learning_rate", "decay_steps", "lr_decay_steps", "lr_scheduler_type", "warmup_ratio", "adam_beta1",
        "adam_beta2", "adam_epsilon", "max_grad_norm", "scale_loss")},
    "warmup_steps": (None, "FlagPerf's warmup_steps is the learning rate's warm-up; " + _OPTIMIZER
                     + ". accelbench's train.warmup_steps (steps left out of the timing) is the case's too"),
    **{key: (None, _MODEL) for key in (
        "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range", "hidden_act", "rms_norm_eps",
        "tie_word_embeddings")},
    "init_checkpoint": (None, _START),
    "continue_training": (None, _START),
}

_EVAL = "accelbench runs no evaluation: it measures training steps"
_DATA = "the data is data.source/data.path (start_task.py --data_dir sets them)"
_RUNTIME = "the launcher and the accelerator kind set this"
IGNORED: dict[str, str] = {
    "save_steps": "accelbench saves no checkpoints",
    "output_dir": "accelbench writes only logs and results, under the log root (--log_dir / --log-root)",
    "logging_dir": "logs go under the log root (--log_dir / --log-root)",
    "logging_steps": "every step is recorded (perf records), whatever the logging cadence",
    "log_freq": "every step is recorded (perf records), whatever the logging cadence",
    "disable_tqdm": "no progress bars: progress is accelbench's own",
    "eval_steps": _EVAL, "eval_iters": _EVAL, "test_iters": _EVAL, "eval_iter_start_samples": _EVAL,
    "per_device_eval_batch_size": _EVAL, "do_eval": _EVAL, "do_predict": _EVAL,
    "do_train": "accelbench always trains",
    "target_loss": "accelbench runs the case's steps and reports throughput; it does not train to a target",
    "target_ppl": "accelbench runs the case's steps and reports throughput; it does not train to a target",
    "max_samples_termination": "accelbench runs the case's steps; it does not stop at a sample count",
    "model_name_or_path": "the model is the case's (cases/<case>/case.yaml); no pretrained weights are loaded",
    "tokenizer_name_or_path": "no tokenizer: the data is token ids already (or synthetic)",
    "model_type": "the model is the case's (cases/<case>/case.yaml)",
    "split": _DATA, "input_dir": _DATA, "share_folder": _DATA,
    "dataloader_num_workers": "accelbench's data sources read token windows in the training process",
    "num_workers": "accelbench's data sources read token windows in the training process",
    "dataloader_drop_last": _DATA, "distributed_dataloader": _DATA,
    "use_env": _RUNTIME, "local_rank": _RUNTIME, "dist_backend": _RUNTIME, "device": _RUNTIME,
    "vendor": "the vendor is the hardware's, from the case name",
    "fuse_attention_qkv": "accelbench's model projects q, k and v with separate linears (no fused-QKV option)",
    "fuse_attention_ffn": "accelbench's model has no fused-MLP option",
    "use_cache": "no generation in pretraining",
    "lm_shift_labels": "accelbench's loss always predicts the next token",
    "tensor_parallel_output": "the tensor-parallel LM head's loss is ParallelCrossEntropy as accelbench builds it",
    "amp_custom_white_list": "not applied: the framework's own AMP op lists are used",
    "amp_custom_black_list": "not applied: the framework's own AMP op lists are used",
    **{key: "no tokenizer: token ids come from the data" for key in (
        "bos_token_id", "eos_token_id", "eol_token_id", "pad_token_id")},
}
KNOWN = sorted({*MAPPED, *COMPANIONS, *CASE, *IGNORED})


@dataclass(frozen=True)
class Setting:
    """One key of the file and what became of it."""

    name: str
    line: int
    value: Any
    kind: str  # mapped | case | ignored
    targets: Targets  # mapped: accelbench key -> value
    compared: Optional[str] = None  # case: the accelbench key the run's value is read from
    why: str = ""

    @property
    def source(self) -> str:
        return f"line {self.line} ({self.name})"


def translate(assigned: dict[str, Assigned], source: Path) -> list[Setting]:
    """Every key of a FlagPerf config as a ``Setting``; an unknown key, a bad value or two keys that set one
    accelbench key differently are refused with the file, line and fix."""
    settings, set_by = [], {}
    for name, item in assigned.items():
        where = f"{source}:{item.line}"
        if name in MAPPED:
            try:
                targets = MAPPED[name](name, item, assigned)
            except ValueError as exc:
                raise UserError(f"{where}: {exc}", "see the FlagPerf table in docs/vendor-onboarding.md") from None
            for key, value in targets.items():
                first = set_by.setdefault(key, (name, item.line, value))
                if first[2] != value:
                    raise UserError(f"{where}: {name} sets {key} to {value!r}, but {first[0]} (line {first[1]}) set "
                                    f"it to {first[2]!r}", "keep one of them")
            settings.append(Setting(name, item.line, item.value, "mapped", targets))
        elif name in COMPANIONS:
            partner = COMPANIONS[name]
            on = partner in assigned and _flag(partner, assigned[partner])
            why = f"read with {partner}" if on else f"{partner} is off, so it has no effect"
            settings.append(Setting(name, item.line, item.value, "mapped" if on else "ignored", {}, why=why))
        elif name in CASE:
            compared, why = CASE[name]
            settings.append(Setting(name, item.line, item.value, "case", {}, compared, why))
        elif name in IGNORED:
            settings.append(Setting(name, item.line, item.value, "ignored", {}, why=IGNORED[name]))
        else:
            close = difflib.get_close_matches(name, KNOWN, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(f"{where}: unknown FlagPerf key {name!r}",
                            f"{hint}the keys accelbench reads, and what each becomes, are in "
                            "docs/vendor-onboarding.md ('FlagPerf configs')")
    return settings


def nested(targets: Targets) -> dict:
    """``{"train.precision": "fp16"}`` -> ``{"train": {"precision": "fp16"}}``."""
    out: dict = {}
    for dotted, value in targets.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out

"""The workload specification: what to train, how long, on which layout.

Both halves read this schema: the orchestrator validates the layered YAML
against it before any host is touched, and the worker validates the resolved
JSON it is handed again at start, so a version skew between the two fails
loudly instead of training something else.

Over 300 lines: the whole worker schema in one place, so both halves and a reader see every key a case can
set and every rule between keys.
"""
from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, conint, model_validator

from training.contract.monitor_spec import CommandMonitorSpec, MonitorName  # noqa: F401 - re-exported
from training.contract.micro import MicroSpec, with_stand_in
from training.contract.spec_base import STEPS_REASON, WIDTH_REASON, StrictModel, bounded
from training.contract.ppo import PPOSpec
from training.contract.tasks import TASKS

SPEC_VERSION = 2

Precision = Literal["fp32", "bf16", "fp16", "fp8"]
Task = Literal[tuple(TASKS)]  # the names of training/contract/tasks.py, declared there once
LoraTarget = Literal["q", "k", "v", "o", "fc", "gate", "down"]



class ModelSpec(StrictModel):
    """A decoder-only transformer, GPT-2 style unless told otherwise.

    Families differ only in these switches: Llama = rotary + rmsnorm + swiglu, no
    biases, untied, GQA (n_kv_head); OPT = learned + relu; Bloom = alibi +
    embedding_norm.
    """

    family: str = "gpt2"
    n_layer: PositiveInt = bounded(le=1024, why="ten times the deepest published model (GPT-3: 96)")
    n_head: PositiveInt = bounded(le=1024, why="ten times the most heads of a published model")
    n_kv_head: Optional[PositiveInt] = bounded(None, le=1024, why="ten times the most heads of a published model",
                                                description="key/value heads (GQA); default n_head (MHA)")
    d_model: PositiveInt = bounded(le=1 << 17, why=WIDTH_REASON)
    d_ff: Optional[PositiveInt] = bounded(None, le=1 << 20, why=WIDTH_REASON, description="MLP hidden size; default "
                                                                                       "4 * d_model")
    vocab_size: PositiveInt = bounded(le=1 << 22, why="16 times the largest published vocabulary (Bloom: 250880)")
    seq_len: PositiveInt = bounded(le=1 << 20, why="a million tokens per sequence is beyond any benchmark here",
                                    description="training sequence length and the number of learned positions")
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    activation: Literal["gelu", "relu", "swiglu"] = "gelu"
    position: Literal["learned", "rotary", "alibi"] = "learned"
    rope_theta: PositiveFloat = Field(10000.0, allow_inf_nan=False)
    embedding_norm: bool = Field(False, description="a norm right after the token embedding (Bloom)")
    tie_embeddings: bool = True
    bias: bool = True

    @model_validator(mode="after")
    def _heads_divide_width(self) -> "ModelSpec":
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        if self.n_head % self.kv_heads:
            raise ValueError(f"n_head ({self.n_head}) must be a multiple of n_kv_head ({self.kv_heads})")
        return self

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @property
    def ffn_hidden(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


class TrainSpec(StrictModel):
    micro_batch_size: PositiveInt = bounded(le=1 << 16, why="sequences per device per micro-batch; a typo "
                                                               "would allocate without end")
    gradient_accumulation_steps: PositiveInt = bounded(1, le=1 << 16, why="micro-batches per step")
    steps: PositiveInt = bounded(le=10_000_000, why=STEPS_REASON)
    warmup_steps: NonNegativeInt = bounded(le=10_000_000, why=STEPS_REASON,
                                            description="steps run but excluded from every timing figure")
    lr: PositiveFloat = Field(3e-4, allow_inf_nan=False)
    weight_decay: float = Field(0.1, ge=0, allow_inf_nan=False)
    seed: int = 1234
    precision: Precision = Field("fp32", description="fp16 scales the loss; fp8 (torchao float8) needs a GPU "
                                  "of compute capability 8.9 or newer, and bf16 around its matmuls")
    recompute: Literal["none", "full", "selective"] = Field(
        "none", description="activation checkpointing: every block (full) or every recompute_every-th (selective)")
    recompute_every: PositiveInt = bounded(2, le=1024, why="no model has more blocks (n_layer <= 1024)")
    amp_level: Literal["O1", "O2"] = Field(
        "O1", description="fp16/bf16: O1 autocasts the matmuls over fp32 weights; O2 keeps the weights in the "
                          "low precision with fp32 master copies in the optimizer (Paddle only)")
    fused_attention: bool = Field(True, description="flash attention where the device has it (torch: SDPA picks "
                                                    "its fused kernels itself)")
    fused_norm: bool = Field(False, description="fused RMSNorm kernel (Paddle on GPU)")
    init_weights: Optional[str] = Field(
        None, description="start from these weights (.npz as training/torch/weights.py writes) instead of a "
                          "random init: how PyTorch and Paddle start from the same model")
    compile: Optional[Literal["default", "reduce-overhead", "max-autotune"]] = Field(
        None, description="torch.compile mode for each transformer block; unset: eager")
    lora_rank: Optional[PositiveInt] = bounded(None, le=1 << 17, why="no wider than the widest model",
                                                description="LoRA adapters of this rank; the base model is frozen")
    lora_alpha: PositiveFloat = Field(16.0, allow_inf_nan=False,
                                      description="adapter output scale is lora_alpha / lora_rank")
    breakdown_steps: NonNegativeInt = bounded(
        3, le=1000, why="a median needs a few steps; more only lengthen the run",
        description="dedicated steps after the measured ones that time data, compute, gradient communication and "
                    "the optimizer apart (training/breakdown.py); 0: no time breakdown")
    lora_targets: tuple[LoraTarget, ...] = Field(
        ("q", "v"), min_length=1, description="linears that get adapters: q k v o (attention), fc gate down (MLP)")

    @model_validator(mode="after")
    def _something_left_to_measure(self) -> "TrainSpec":
        if self.warmup_steps >= self.steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) must be smaller than steps ({self.steps}), "
                "or no step is left to measure"
            )
        return self


class DataSpec(StrictModel):
    """Where the tokens come from.

    synthetic              generated token ids (pretrain): no files, same FLOPs as text; ``data.synthetic`` says
                           which: ``markov`` (default, a chain a model learns, loss floor known:
                           training/data/markov.py) or ``uniform`` (random ids, the loss stays at ln(vocab))
    tokens                 a Megatron/PaddleNLP mmap dataset: ``<path>_ids.npy`` + ``<path>_idx.npz``
    instruction            alpaca-style jsonl (finetune, lora), byte-level tokenised, padded per batch
    synthetic_instruction  generated alpaca-style records (finetune, lora without a file)
    """

    source: Literal["synthetic", "tokens", "instruction", "synthetic_instruction"] = "synthetic"
    path: Optional[str] = Field(None, description="tokens: the dataset prefix; instruction: the .jsonl file "
                                                  "(on the hosts that run the case)")
    synthetic: Literal["markov", "uniform"] = Field(
        "markov", description="data.source synthetic: a sparse Markov chain with a known entropy rate (a model "
                              "learns it, so loss curves can be checked) or uniform random ids (throughput only)")
    seed: Optional[int] = Field(None, description="the data seed (which samples, in which order); unset: "
                                                  "train.seed. A different data seed with the same train.seed "
                                                  "trains the same initial weights on other samples")
    records: PositiveInt = bounded(512, le=10_000_000, why="generated in memory before training starts",
                                    description="synthetic_instruction: how many records to generate")

    @model_validator(mode="after")
    def _path_when_file(self) -> "DataSpec":
        if self.source in ("tokens", "instruction") and not self.path:
            raise ValueError(f"data.source {self.source} reads a file: set data.path")
        if self.source.startswith("synthetic") and self.path:
            raise ValueError(f"data.source {self.source} reads no file; set data.source to tokens or "
                             "instruction to use data.path")
        # the default may be stored with every field (a dumped workload); only a chosen uniform is refused
        if self.synthetic != "markov" and self.source != "synthetic":
            raise ValueError(f"data.synthetic chooses synthetic tokens; data.source is {self.source}: unset it")
        return self

    @property
    def instruction(self) -> bool:
        return self.source in ("instruction", "synthetic_instruction")


class ParallelSpec(StrictModel):
    """One vocabulary for every framework's parallel layout (the keys of the vendors' extern configs)."""

    data_parallel_degree: Optional[PositiveInt] = Field(
        None, description="default: world size / (tensor x pipeline degree); set it to have the layout checked")
    tensor_parallel_degree: PositiveInt = 1
    pipeline_parallel_degree: PositiveInt = 1
    pipeline_schedule: Literal["gpipe", "1f1b", "interleaved"] = Field(
        "1f1b", description="micro-batch order across stages; the micro-batches of a step are "
                            "train.gradient_accumulation_steps (Paddle's accumulate_steps)")
    virtual_pipeline_degree: Optional[PositiveInt] = Field(
        None, description="stages per rank (interleaved schedule only); default 2 for interleaved, else 1")
    sharding: Literal["none", "stage1", "stage2", "stage3"] = Field(
        "none", description="ZeRO stage: 1 optimizer state, 2 + gradients, 3 + parameters")
    sharding_parallel_degree: Optional[PositiveInt] = Field(
        None, description="ranks each shard group spans; default (and for now the only choice): all data-parallel ranks")
    sequence_parallel: bool = False
    offload: bool = Field(False, description="keep sharded parameters, gradients and optimizer state on the CPU")
    sync_gradients_each_micro_batch: bool = Field(
        True, description="sharding stage2/3 with gradient accumulation: reduce-scatter every micro-batch's "
                          "gradients, so each rank keeps only its gradient shard (more communication); false "
                          "reduces only the last one's, and every rank holds the full unsharded gradients "
                          "meanwhile, which defeats the memory sharding saves: hence the default. Pipeline "
                          "stages always reduce after the last micro-batch (torch's schedule)")

    @model_validator(mode="after")
    def _offload_needs_sharding(self) -> "ParallelSpec":
        if self.offload and self.sharding not in ("stage2", "stage3"):
            raise ValueError("offload needs sharding stage2 or stage3")
        if self.virtual_pipeline_degree not in (None, 1) and self.pipeline_schedule != "interleaved":
            raise ValueError("virtual_pipeline_degree > 1 puts several stages on each rank: it needs "
                             "pipeline_schedule interleaved")
        if self.sequence_parallel and self.tensor_parallel_degree == 1:
            raise ValueError("sequence_parallel splits activations across the tensor-parallel group; "
                             "it needs tensor_parallel_degree > 1")
        return self

    @property
    def stages_per_rank(self) -> int:
        return self.virtual_pipeline_degree or (2 if self.pipeline_schedule == "interleaved" else 1)

    def data_degree(self, world_size: int) -> int:
        return self.data_parallel_degree or max(1, world_size // (self.tensor_parallel_degree
                                                                   * self.pipeline_parallel_degree))


class DebugSpec(StrictModel):
    """Fault injection, so the orchestrator's failure paths are tested on real workers."""

    fail_at_step: Optional[NonNegativeInt] = None
    fail_rank: NonNegativeInt = 0
    hang_at_step: Optional[NonNegativeInt] = None
    oom_at_step: Optional[NonNegativeInt] = Field(
        None, description="ask the device allocator for 1 PiB at this step, on fail_rank: a real out-of-memory")
    exit_code_after_end: Optional[conint(ge=1, le=255)] = Field(
        None, description="on fail_rank, exit with this code right after the end record, skipping the framework's "
                          "teardown: a crash at exit after every figure was reported (the round stays ok, with a "
                          "warning)")
    memory_limit_mib: Optional[PositiveFloat] = Field(
        None, allow_inf_nan=False,
        description="a smaller device: after each step every rank compares its peak memory (the figure reports "
                    "show: allocator peak on a device, peak RSS on a CPU) with this limit and, above it, takes "
                    "the real out-of-memory path (oom_at_step's allocation); grows with the batch, so sweeps and "
                    "max-batch search can be tested on any machine")
    grad_noise: float = Field(
        0.0, ge=0, le=10, allow_inf_nan=False,
        description="a wrong kernel, deliberately (PyTorch workers): before each optimizer step every gradient "
                    "element g becomes g * (1 + grad_noise * z), z standard normal (seeded by train.seed and the "
                    "step): what a loss-curve reference (--check) must catch")
    collective_delay_ms: Optional[PositiveFloat] = bounded(
        None, le=60_000, why="a delay, not a hang (hang_at_step is that)",
        description="sleep this long before every data-parallel and tensor-parallel collective (DDP's "
                    "all-reduce of each bucket, FSDP's all-gathers and reduce-scatters, ZeRO-1's parameter sync in "
                    "breakdown steps, torch tensor parallel's DTensor collectives; in measured and breakdown "
                    "steps, PPO's roles included; Paddle, in breakdown steps only (no hook in its C++ reducer nor in "
                    "fleet): plain data parallel's all-reduces, sharding's and CPU tensor parallel's collectives): a "
                    "known communication cost, to check the time breakdown")
    data_fetch_delay_ms: Optional[PositiveFloat] = bounded(
        None, le=60_000, why="a delay, not a hang (hang_at_step is that)",
        description="sleep this long in every micro-batch fetch (PPO: every experience making's prompts), on "
                    "every rank: a known data-path cost")
    compute_delay_ms: Optional[PositiveFloat] = bounded(
        None, le=60_000, why="a delay, not a hang (hang_at_step is that)",
        description="on fail_rank only, sleep this long before each step's forward and backward (PPO: before "
                    "each experience making and each trained role's forward and backward): a straggler")
    compute_delay_spins: bool = Field(
        False, description="compute_delay_ms spins on the CPU instead of sleeping: a slow kernel's time, which keeps "
                           "the rank's core busy (a sleeping rank leaves its core to other processes, whose use of it "
                           "a round's contention counts)")


class WorkloadSpec(StrictModel):
    task: Task = "pretrain"
    model: ModelSpec
    train: TrainSpec
    data: DataSpec = DataSpec()
    parallel: ParallelSpec = ParallelSpec()
    debug: DebugSpec = DebugSpec()
    ppo: Optional[PPOSpec] = Field(None, description="task ppo: the RLHF loop's knobs")
    micro: Optional[MicroSpec] = Field(None, description="task micro: which micro-benchmark, at which sizes "
                                                         "(training/contract/micro.py)")

    @model_validator(mode="before")
    @classmethod
    def _micro_trains_no_model(cls, data):
        return with_stand_in(data, ModelSpec, TrainSpec)  # micro.py says why

    @model_validator(mode="after")
    def _task_fits_data(self) -> "WorkloadSpec":
        if (self.task == "micro") != (self.micro is not None):
            raise ValueError("a micro section needs task micro, and task micro needs a micro section "
                             "(e.g. micro: {bench: gemm})")
        if self.task == "micro":
            return self
        if self.debug.collective_delay_ms is not None and self.parallel.pipeline_parallel_degree > 1:
            raise ValueError("debug.collective_delay_ms delays the data-parallel and tensor-parallel collectives "
                             "only (DDP's all-reduce, ZeRO's and FSDP's, DTensor's; no pipeline parallelism): "
                             "remove it or change the layout")
        if self.task == "ppo" or self.ppo is not None:
            return check_ppo(self)
        if self.task == "pretrain" and self.data.instruction:
            raise ValueError(f"task pretrain trains on token streams; data.source {self.data.source} is "
                             "instruction data (use task finetune or lora)")
        if self.task != "pretrain" and not self.data.instruction:
            raise ValueError(f"task {self.task} trains on instruction data: set data.source to instruction "
                             "(with data.path) or synthetic_instruction")
        if (self.task == "lora") != (self.train.lora_rank is not None):
            raise ValueError("task lora needs train.lora_rank, and train.lora_rank needs task lora")
        if "gate" in self.train.lora_targets and self.model.activation != "swiglu":
            raise ValueError(f"lora_targets has 'gate' but the model's MLP ({self.model.activation}) has no gate")
        return self


class DeviceSpec(StrictModel):
    """The worker's part of an accelerator kind: how the frameworks address the device of this round."""

    kind: str = Field(description="the accelerator kind's name (cpu, nvidia, rocm, or one a vendor declares)")
    torch_device: str = Field("cpu", description="torch device type: cpu, cuda (also ROCm), xpu, npu, mlu, musa, ...")
    torch_module: Optional[str] = Field(None, description="imported before torch uses the device (torch_npu, ...)")
    paddle_device: str = Field("cpu", description="paddle.set_device name: cpu, gpu, xpu, or a custom device")
    backend: Optional[str] = Field(None, description="collective backend of this round's framework; unset: the "
                                                     "framework's default for the device")
    visible_devices_env: Optional[str] = None
    worker_plugin: Optional[str] = Field(None, description="a vendor module with worker hooks, {vendor_dir}/<file>.py "
                                                           "(the vendor's folder), or relative to the code root")
    monitor: Union[MonitorName, CommandMonitorSpec] = "none"

    @property
    def is_cpu(self) -> bool:
        return self.torch_device == "cpu"


class RuntimeSpec(StrictModel):
    """Where and as what the workload runs; filled in by the orchestrator's plan."""

    case_name: str
    run_id: str
    round: PositiveInt
    framework: str
    device: DeviceSpec


class WorkerConfig(StrictModel):
    """The one file a worker is handed (``--config``)."""

    spec_version: Literal[2] = SPEC_VERSION
    workload: WorkloadSpec
    runtime: RuntimeSpec


def check_ppo(spec: WorkloadSpec) -> WorkloadSpec:
    """Task ppo: a ppo section, random prompts, positions for the whole sequence, steps = learning updates."""
    if spec.task != "ppo" or spec.ppo is None:
        raise ValueError("a ppo section needs task ppo, and task ppo needs a ppo section")
    ppo, train = spec.ppo, spec.train
    if spec.data.source != "synthetic":
        raise ValueError("task ppo generates from random prompts: data.source must be synthetic")
    if ppo.total_length > spec.model.seq_len:
        raise ValueError(f"ppo.prompt_length + ppo.generation_length ({ppo.total_length}) is longer than "
                         f"model.seq_len ({spec.model.seq_len}): raise model.seq_len or shorten them")
    if spec.model.position != "learned":
        raise ValueError(f"task ppo generates with a KV cache for learned positions (gpt2, opt); "
                         f"model.position is {spec.model.position}")
    steps, warmup = ppo.num_episodes * ppo.updates_per_episode, ppo.updates_per_episode
    if (train.steps, train.warmup_steps) != (steps, warmup):
        raise ValueError(f"task ppo: a step is one learning update, so set train.steps to {steps} "
                         f"(num_episodes x max_timesteps / update_timesteps) and train.warmup_steps to {warmup} "
                         "(the first episode)")
    if "gate" in train.lora_targets and spec.model.activation != "swiglu":
        raise ValueError(f"lora_targets has 'gate' but the model's MLP ({spec.model.activation}) has no gate")
    par = spec.parallel
    unsupported = [what for what, on in (
        ("tensor or pipeline parallelism", par.tensor_parallel_degree > 1 or par.pipeline_parallel_degree > 1),
        ("train.compile", train.compile is not None), ("train.init_weights", train.init_weights is not None),
        (f"precision {train.precision} (use bf16 or fp32: the PPO loop does no loss scaling)",
         train.precision in ("fp16", "fp8"))) if on]
    if unsupported:
        raise ValueError(f"task ppo runs data parallel (DDP, ZeRO-1/2/3, offload) only; unset: "
                         f"{', '.join(unsupported)}")
    return spec

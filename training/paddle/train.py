"""The PaddlePaddle training loop: fleet hybrid parallel, timed like the PyTorch loop.

Started by ``python -m paddle.distributed.launch`` (one launcher per node). The
layout vocabulary is the PyTorch side's (``training/contract/spec.py``); it maps onto
``fleet.DistributedStrategy().hybrid_configs``:

  tensor_parallel_degree              mp_degree (ColumnParallelLinear / RowParallelLinear / VocabParallelEmbedding)
  sequence_parallel                   fleet's sequence_parallel_utils: [seq/tp, batch, hidden] activations between
                                      the tensor-parallel layers, norm gradients all-reduced by fleet's hooks
  pipeline_parallel_degree            pp_degree (PipelineLayer; micro-batches = gradient_accumulation_steps)
  sharding + sharding_parallel_degree sharding_degree; stage1 through fleet's sharding optimizer,
                                      stage2/3 through group_sharded_parallel (accelerators only)
  data ranks left over                dp_degree

The timed loop is ``training/harness.py``'s; this module brings Paddle's
operations. The loss of a micro-batch is its summed cross entropy over the
global count of supervised tokens of the step, so any layout reports the loss
one process with the whole batch would. Tasks pretrain, finetune and lora: the
data side (instruction batches padded to their longest sample, effective
tokens without the padding) is ``training/data/batches.py``, the torch
worker's; LoRA is ``training/paddle/lora.py``.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import paddle
import paddle.distributed as dist

from training.contract import flops
from training.faults import compute_delay, sleep_ms
from training import harness, train_task
from training.data.batches import StepCounts
from training.paddle import breakdown, device as devices, hybrid
from training.paddle.data import open_data
from training.paddle.lora import apply_lora, trainable_parameters
from training.paddle.model import GPT, Kernels
from training.paddle.precision import Precision, set_fp32_matmul
from training.paddle.weights import canonical_name, load as load_weights
from training.contract.spec import WorkerConfig, WorkloadSpec
from training.unsupported import UnsupportedOnDevice



class Layout:
    """The hybrid degrees of this run and this rank's place in them."""

    def __init__(self, spec: WorkloadSpec, world: int):
        par = spec.parallel
        self.world = world
        self.tp, self.pp = par.tensor_parallel_degree, par.pipeline_parallel_degree
        self.data = par.data_degree(world)
        sharded = par.sharding != "none"
        self.sharding = (par.sharding_parallel_degree or self.data) if sharded else 1
        self.dp = self.data // self.sharding
        self.tp_rank = self.pp_rank = self.data_rank = 0

    @property
    def hybrid(self) -> bool:
        return self.world > 1

    def hybrid_configs(self) -> dict:
        return {"dp_degree": self.dp, "mp_degree": self.tp, "pp_degree": self.pp, "sharding_degree": self.sharding}

    def locate(self, hcg) -> None:
        self.tp_rank = hcg.get_model_parallel_rank()
        self.pp_rank = hcg.get_stage_id()
        # Data ranks take global samples by index: dp and sharding together split the batch.
        self.data_rank = hcg.get_data_parallel_rank() * self.sharding + hcg.get_sharding_parallel_rank()


def _check_supported(spec: WorkloadSpec, layout: Layout, on_cpu: bool) -> None:
    if not on_cpu:
        return
    precision = spec.train.precision
    if precision != "fp32":
        raise UnsupportedOnDevice(f"Paddle's {precision} mixed precision needs an accelerator: on a CPU place "
                                  "AMP has no effect and bf16 kernels are missing")
    if hybrid.group_sharded(spec, layout):
        raise UnsupportedOnDevice(f"Paddle's sharding {spec.parallel.sharding} (group_sharded_parallel) runs on "
                                  "GPU/XPU only; use sharding stage1 on a CPU")


def _kernels(spec: WorkloadSpec, on_cpu: bool) -> Kernels:
    """Flash attention and the fused norm where Paddle has them: on an accelerator."""
    fused = not on_cpu
    return Kernels(flash_attention=fused and spec.train.fused_attention and spec.train.precision in ("fp16", "bf16"),
                   fused_rms_norm=fused and spec.train.fused_norm)


def build_model(spec: WorkloadSpec, layout: Layout, on_cpu: bool):
    """The model of this rank (a pipeline stage under pipeline parallelism), with the case's initial weights."""
    kernels = _kernels(spec, on_cpu)
    if layout.pp > 1:
        from training.paddle.pipeline import pipeline_model
        model, named = pipeline_model(spec, layout, kernels)
    else:
        model = GPT(spec.model, layout.tp, layout.tp_rank, kernels, spec.parallel.sequence_parallel)
        named = [(canonical_name(name), p) for name, p in model.named_parameters()]
        if spec.train.recompute != "none":
            model.recompute_every = 1 if spec.train.recompute == "full" else spec.train.recompute_every
    if spec.train.init_weights:
        load_weights(named, spec.train.init_weights, layout.tp_rank, layout.tp)
    if spec.parallel.sequence_parallel and layout.tp > 1:
        # Norms and row biases see this rank's sequence slice only: fleet's hooks all-reduce their
        # gradients across the tensor-parallel group once per step (after the last micro-batch). Not the
        # fused variant: its hook takes the gradient as an argument, but `_register_backward_hook` calls
        # hooks without one, so backward fails (Paddle 3.3: "GradNodePyLayer_ReduceScatterOp:Get backward
        # function failed").
        from paddle.distributed.fleet.utils.sequence_parallel_utils import register_sequence_parallel_allreduce_hooks
        register_sequence_parallel_allreduce_hooks(model, spec.train.gradient_accumulation_steps,
                                                   fuse_sequence_parallel_allreduce=False)
    return model


def train(cfg: WorkerConfig) -> None:
    """Tasks pretrain, finetune and lora on Paddle."""
    harness.run(cfg, train_task.over(PaddleWorker))


class PaddleWorker(harness.FrameworkWorker):
    framework = "paddle"
    version = paddle.__version__

    def __init__(self, cfg: WorkerConfig, ranks: harness.Ranks):
        spec = self.spec = cfg.workload
        self.device_spec, self.world, self.rank = cfg.runtime.device, ranks.world_size, ranks.rank
        self.device = devices.open_device(self.device_spec)
        self.on_cpu = self.device_spec.paddle_device == "cpu"
        self.fp32_matmul = set_fp32_matmul(spec.train.precision, self.on_cpu)  # before any matmul
        layout = self.layout = Layout(spec, self.world)
        _check_supported(spec, layout, self.on_cpu)
        hcg = None
        if layout.hybrid:
            from paddle.distributed import fleet
            if self.on_cpu and self.world > 2:  # gloo groups of the same size side by side
                from training.paddle import cpu_compat
                cpu_compat.install_group_stores()
            fleet.init(is_collective=True, strategy=hybrid.strategy(spec, layout))
            hcg = fleet.get_hybrid_communicate_group()
            layout.locate(hcg)
            if self.on_cpu:
                from training.paddle import cpu_compat
                cpu_compat.install()
        hybrid.seed(spec.train.seed, layout)
        model = build_model(spec, layout, self.on_cpu)
        if spec.train.lora_rank:  # after the base weights are in: adapters start from their own seeds
            apply_lora(model, spec.train)
        trainable = trainable_parameters(model)
        self.n_params = flops.total_params(spec.model)
        self.trainable_params = sum(p.size for p in trainable) if spec.train.lora_rank else self.n_params
        optimizer = paddle.optimizer.AdamW(learning_rate=spec.train.lr, parameters=trainable,
                                           weight_decay=spec.train.weight_decay, beta1=0.9, beta2=0.999, epsilon=1e-8)
        self.precision = Precision(spec)
        model, optimizer = self.precision.decorate(model, optimizer)
        if layout.hybrid:
            model, optimizer = hybrid.wrap(model, optimizer, self.precision, spec, layout, hcg)
        self.model, self.optimizer, self.hcg = model, optimizer, hcg
        self.no_sync = getattr(model, "no_sync", None)  # plain data parallel: sync on the last micro-batch only
        self.data = open_data(spec, layout.data_rank, layout.data)
        self.data_description = self.data.description
        self.counts = StepCounts(spec)
        self.model_parallel_size = layout.tp * layout.pp

    def fetch(self) -> list:
        """The step's micro-batches (``debug.data_fetch_delay_ms`` after each): fetching only (the time
        breakdown's ``data_s``; no collective here)."""
        batches = []
        for _ in range(self.spec.train.gradient_accumulation_steps):
            batches.append(self.data.next_batch())
            sleep_ms(self.spec.debug.data_fetch_delay_ms)
        return batches

    def loss_scale(self, batches: list) -> float:
        """The scale of the summed losses: each micro-batch's summed loss over the step's global count of
        supervised tokens, times the data degree since data parallelism and sharding average the replicas'
        gradients (the torch worker's rule). An all-reduce for instruction data: the breakdown's compute phase."""
        return self.layout.data / max(self._global_count(sum(b.supervised_tokens for b in batches)), 1)

    def compute_delay(self) -> None:
        compute_delay(self.spec.debug, self.rank)

    def train_step(self) -> harness.StepWork:
        batches = self.fetch()
        scale = self.loss_scale(batches)
        counts = self.counts(batches)  # tokens, effective tokens and FLOPs: the torch worker's figures
        self.compute_delay()
        if self.layout.pp > 1:  # pretraining only (the plan refuses instruction data in a Paddle pipeline)
            return harness.StepWork(loss=_pipeline_step(self.model, self.optimizer, batches, self.precision),
                                    **counts)
        loss = self.forward_backward(batches, scale)
        self.optimizer_step()
        return harness.StepWork(loss=loss, **counts)

    def forward_backward(self, batches: list, scale: float, sync: bool = True) -> paddle.Tensor:
        """Every micro-batch's forward and backward; data parallel synchronises on the last one only, and on
        none with ``sync`` False (the time breakdown's compute phase: ``training/paddle/breakdown.py``)."""
        precision, loss = self.precision, paddle.zeros([], dtype="float32")
        for index, batch in enumerate(batches):
            last = sync and index == len(batches) - 1
            context = contextlib.nullcontext() if last or self.no_sync is None else self.no_sync()
            with context:
                with precision.autocast():
                    micro = self.model(paddle.to_tensor(batch.inputs), paddle.to_tensor(batch.targets)) * scale
                (precision.scaler.scale(micro) if precision.scaler else micro).backward()
            loss += micro.detach()
        return loss

    def optimizer_step(self) -> None:
        if self.precision.scaler:
            self.precision.scaler.step(self.optimizer)
            self.precision.scaler.update()
        else:
            self.optimizer.step()

    def close(self) -> None:
        """Stop the data prefetch thread."""
        self.data.close()

    def breakdown_phases(self):
        return breakdown.phases(self)

    def _global_count(self, local: int) -> int:
        """Supervised tokens in the global batch: an all-reduce where batches differ (instruction data)."""
        if not self.spec.data.instruction:  # every position of every sample is supervised: same on every rank
            return local * self.layout.data
        count = paddle.to_tensor(local, dtype="int64")
        if self.world > 1:
            dist.all_reduce(count)  # ranks of one replica (tensor parallel) hold the same batch
        return int(count.item()) // self.model_parallel_size

    def after_step(self, work: harness.StepWork) -> tuple[float, Optional[float]]:
        grad_norm = self._grad_norm()
        self.optimizer.clear_grad()
        loss = work.loss
        if self.world > 1:  # every rank holds its replica's loss: average over the data replicas
            dist.all_reduce(loss)
            loss = loss / self.world
        return float(loss.item()), grad_norm

    def _grad_norm(self) -> Optional[float]:
        """The L2 norm of the whole model's gradient this step, as the PyTorch worker reports it, so parity
        tests compare gradients and not only losses (AdamW hides a constant gradient scale from the loss).

        Data-parallel gradients are already averaged over the replicas; a tensor-parallel shard
        (``is_distributed``) adds its squares over the model-parallel group, while replicated parameters
        (norms, whose sequence-parallel gradients fleet's hooks all-reduce) count once. None under pipeline
        parallelism (``train_batch`` steps and clears the gradients inside) and sharding (a rank holds the
        reduced gradients of its own shard only): there the parity tests compare losses alone.
        """
        if self.layout.pp > 1 or self.layout.sharding > 1:
            return None
        sharded, replicated = paddle.zeros([], dtype="float32"), paddle.zeros([], dtype="float32")
        for param in self.model.parameters():
            if param.grad is None:
                continue
            squares = paddle.square(param.grad.astype("float32")).sum()
            if getattr(param, "is_distributed", False):
                sharded += squares
            else:
                replicated += squares
        if self.layout.tp > 1:
            dist.all_reduce(sharded, group=self.hcg.get_model_parallel_group())
        return float(paddle.sqrt(sharded + replicated).item())

    def synchronize(self) -> None:
        devices.synchronize()

    def memory(self) -> harness.DeviceMemory:
        return devices.memory(self.device_spec)

    def reset_peak_memory(self) -> None:
        devices.reset_peak_memory()

    def environment(self) -> dict:
        return {**devices.environment(self.device_spec), "fp32_matmul": self.fp32_matmul}

    def allocate(self, nbytes: int) -> object:
        return paddle.empty([nbytes], dtype="uint8")


def _pipeline_step(model, optimizer, batches, precision):
    """One step of the fleet pipeline: its scheduler runs the micro-batches (accumulate_steps) itself."""
    import numpy as np

    inputs = paddle.to_tensor(np.concatenate([b.inputs for b in batches]))
    targets = paddle.to_tensor(np.concatenate([b.targets for b in batches]))
    with precision.autocast():
        loss = model.train_batch([inputs, targets], optimizer, scaler=precision.scaler)
    return loss.detach().astype("float32")

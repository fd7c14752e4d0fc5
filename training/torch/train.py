"""The PyTorch worker: its operations for the one timed loop in ``training/harness.py``.

Started by torchrun, one process per device. Device-generic: the kind's
``DeviceSpec`` names the torch device type; ``training/torch/device.py`` reaches
it through ``torch.accelerator``.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from training import harness, train_task
from training.faults import compute_delay, sleep_ms
from training.contract.spec import WorkerConfig
from training.torch import breakdown, breakdown_tp
from training.torch import device as devices
from training.torch import init
from training.torch import precision as precisions
from training.torch.compiles import CompileCounter
from training.torch.data import StepCounts, open_dataset
from training.torch.lora import apply_lora, trainable_parameters
from training.torch.model import GPT
from training.torch.parallel import parallelize



def train(cfg: WorkerConfig) -> None:
    """Tasks pretrain, finetune and lora on torch (training/workers.py: ppo is training/torch/ppo_loop.py's
    ``run``, an entry of its own on the same lifecycle)."""
    harness.run(cfg, train_task.over(TorchWorker))


class TorchWorker(devices.OnTorchDevice, harness.FrameworkWorker):
    framework = "torch"
    version = torch.__version__

    def __init__(self, cfg: WorkerConfig, ranks: harness.Ranks):
        spec = self.spec = cfg.workload
        self.world, self.rank = ranks.world_size, ranks.rank
        self.torch_device = devices.open_device(cfg.runtime.device, ranks.local_rank)
        self.device, self.on_cpu = str(self.torch_device), self.torch_device.type == "cpu"
        # False only where a process group existed before this worker (tests/parity_worker.py): then it is
        # not this worker's to destroy.
        self.owns_process_group = self.world > 1 and devices.init_process_group(
            cfg.runtime.device, self.torch_device, spec.parallel.offload)

        self.precision = precisions.resolve(spec.train.precision, self.torch_device)  # fp8 may be unsupported
        torch.manual_seed(spec.train.seed)  # any other randomness: the same on every rank
        # On the meta device: no memory until the layout has split it; each rank then materialises its
        # share, every parameter from its own seed (training/torch/init.py), as one process would.
        with torch.device("meta"):
            model = GPT(spec.model)
        shapes = {name: p.shape for name, p in model.named_parameters()}
        weights = init.WeightsFile(spec.train.init_weights, shapes) if spec.train.init_weights else None
        self.n_params = sum(p.numel() for p in shapes.values())
        if spec.train.lora_rank:
            apply_lora(model, spec.train)
        self.precision.convert(model)
        self.trainable_params = sum(p.numel() for p in trainable_parameters(model))
        init.name_modules(model)

        def materialize(module: torch.nn.Module, where: torch.device) -> None:
            init.materialize(module, where, spec.train.seed, spec.model.n_layer, weights, self.torch_device)

        self.parallel = parallelize(model, spec, self.world, ranks.rank, self.torch_device, materialize)
        if weights is not None:
            weights.close()
        self.model_parallel_size = self.parallel.model_parallel_size
        self.compiles = CompileCounter(spec.train)
        self.scaler = self.precision.grad_scaler(self.parallel.shards_gradients)
        self.data = open_dataset(spec, dp_rank=self.parallel.dp_rank, dp_size=self.parallel.dp_size)
        self.data_description = self.data.description
        self.counts = StepCounts(spec)
        self.flops_at_width = self.counts.flops_at_width
        # debug.collective_delay_ms before each tensor-parallel collective of a measured step (DTensor's)
        self.tp_delay = breakdown_tp.delayed(spec.debug.collective_delay_ms
                                             if spec.parallel.tensor_parallel_degree > 1 else None)

    def fetch(self) -> list:
        """The step's micro-batches: fetching only (the time breakdown's ``data_s``; no collective here)."""
        spec, parallel = self.spec, self.parallel
        batches = []
        for _ in range(spec.train.gradient_accumulation_steps):
            batches.append(self.data.next_batch())
            sleep_ms(spec.debug.data_fetch_delay_ms)
        if parallel.pipeline is not None:  # a pipeline's shapes are fixed at its first step
            batches = [b.padded_to(spec.model.seq_len) for b in batches]
        return batches

    def loss_scale(self, batches: list) -> float:
        """The scale of the micro-batches' summed losses; an all-reduce for instruction data, so the time
        breakdown counts it in its compute phase, not in ``data_s``."""
        # The step's loss is the mean over every supervised token of the global batch, as one process
        # with the whole batch would take it, whatever the layout or accumulation: each micro-batch's
        # summed loss is divided by the global count, times dp_size since data parallelism averages.
        supervised = self._global_count(sum(b.supervised_tokens for b in batches))
        return self.parallel.dp_size / max(supervised, 1)

    def compute_delay(self) -> None:
        compute_delay(self.spec.debug, self.rank)

    def train_step(self) -> harness.StepWork:
        parallel = self.parallel
        self.compiles.step_started()
        batches = self.fetch()
        scale = self.loss_scale(batches)
        self.compute_delay()
        with self.tp_delay():
            loss_sum = parallel.forward_backward(batches, scale, self.precision, self.scaler, self.torch_device)
        if self.spec.debug.grad_noise:
            perturb_gradients(parallel.optimizer, self.spec.debug.grad_noise, self.spec.train.seed, self.steps_done)
            self.steps_done += 1
        with self.tp_delay():  # sequence parallel: the norms' Partial gradients are all-reduced in here
            self.scaler.step(parallel.optimizer)
        self.scaler.update()
        return harness.StepWork(loss=loss_sum, **self.counts(batches))  # padding excluded: training/data/batches.py

    steps_done = 0  # optimizer steps taken, for debug.grad_noise's seed

    def breakdown_phases(self):
        return breakdown.phases(self)

    def breakdown_in_warmup(self) -> bool:
        return breakdown.leaves_model(self.spec, self.parallel)

    def _global_count(self, local: int) -> int:
        """Supervised tokens in the global batch: an all-reduce where batches differ (instruction data)."""
        if not self.spec.data.instruction:  # every position of every sample is supervised: same on every rank
            return local * self.parallel.dp_size
        count = torch.tensor(local, device=self.torch_device, dtype=torch.int64)
        if self.world > 1:
            dist.all_reduce(count)  # ranks that share one replica (tensor parallel) hold the same batch
        return int(count.item()) // self.parallel.model_parallel_size

    def after_step(self, work: harness.StepWork) -> tuple[float, Optional[float]]:
        grad_norm = self.parallel.grad_norm(self.torch_device)
        self.parallel.optimizer.zero_grad(set_to_none=True)
        loss_sum = work.loss
        if self.world > 1:  # the loss of the whole batch, as one process would see it
            dist.all_reduce(loss_sum)
            loss_sum /= self.parallel.loss_copies
        return float(loss_sum.item()), grad_norm

    def recompiles(self) -> Optional[int]:
        """Graphs torch.compile built after the warm-up steps (None when not compiling): for the end record."""
        return self.compiles.after_warmup()

    def environment(self) -> dict:
        env = devices.environment(self.torch_device)
        if self.parallel.dp_size > 1 and self.spec.parallel.sharding in ("stage2", "stage3"):  # FSDP2
            # How gradients are reduced under accumulation changes both memory and communication.
            env["sync_gradients_each_micro_batch"] = (self.spec.parallel.sync_gradients_each_micro_batch
                                                      and self.parallel.pipeline is None)
        return env

    def close(self) -> None:
        """Stop the data prefetch thread; destroy the process group this worker created (none where it reused
        one: see ``__init__``)."""
        self.data.close()
        if self.owns_process_group:
            dist.destroy_process_group()


def perturb_gradients(optimizer: torch.optim.Optimizer, relative: float, seed: int, step: int) -> None:
    """``debug.grad_noise``: g *= 1 + relative * z, z ~ N(0, 1) from (seed, step), the same draw on every rank
    (replicated gradients stay equal); a DTensor's local shard is perturbed in place."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                z = torch.randn(grad.shape, generator=generator).to(grad.device, grad.dtype)
                grad.mul_(1 + relative * z)

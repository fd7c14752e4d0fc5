"""The framework registry: what each framework declares. A framework names the Python distribution whose
version the case name's ``<framework>_<version>`` must match, the launcher that starts its ranks (an axis of
its own: run_benchmarks/backends/launchers/, which own the argv, the log layout and the start errors), the
tasks its worker runs (training/workers.py registers one entry per framework and task), and the parts of a
layout its workload cannot run. The collective backend is the accelerator kind's (``kinds.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from training.contract.tasks import TASKS

from run_benchmarks.registry import Registry, instance_of

if TYPE_CHECKING:
    from training.contract.spec import WorkloadSpec


class Framework:
    name: ClassVar[str]
    distributions: ClassVar[tuple[str, ...]]  # the pip distributions whose version the case name pins: first found
    launcher: ClassVar[str]  # the launcher's name (backends/launchers/)
    tasks: ClassVar[tuple[str, ...]] = tuple(TASKS)  # the tasks its worker runs (training/workers.py)

    def unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        """Parts of a (consistent) layout this framework's workload cannot run; empty when it can."""
        if workload.task not in self.tasks:
            return [f"task {workload.task}: training/{self.name} runs {', '.join(self.tasks)}"]
        return self.layout_unsupported(workload, world_size)

    def layout_unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        return []


FRAMEWORKS: Registry[Framework] = Registry("framework", make=instance_of)
FRAMEWORKS.register("torch", f"{__name__}:Torch")
FRAMEWORKS.register("paddle", f"{__name__}:Paddle")


def get(name: str) -> Framework:
    return FRAMEWORKS.get(name)


def names() -> list[str]:
    return list(FRAMEWORKS)


class Torch(Framework):
    name = "torch"
    distributions = ("torch",)
    launcher = "torchrun"

    def layout_unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        par = workload.parallel
        missing = []
        if par.tensor_parallel_degree > 1 and par.sharding in ("none", "stage1") and par.data_degree(world_size) > 1:
            missing.append("data parallelism across tensor-parallel groups needs sharding stage2 or stage3 "
                           "(FSDP2 x TP); DDP and ZeRO-1 over tensor-parallel parameters are not supported")
        shard = par.sharding_parallel_degree
        if shard not in (None, par.data_degree(world_size)) and par.sharding != "none":
            missing.append(f"sharding_parallel_degree {shard}: training/torch shards across all "
                           f"{par.data_degree(world_size)} data-parallel ranks (leave it unset)")
        if workload.train.amp_level == "O2":
            missing.append("train.amp_level O2 is Paddle's; torch runs O1 (autocast over fp32 weights)")
        if workload.train.precision == "fp8" and not workload.train.compile:
            missing.append("precision fp8 (torchao float8) pays off only compiled: its casts run eagerly "
                           "otherwise and the figure would measure them; set train.compile (e.g. default)")
        if workload.train.fused_norm:
            missing.append("train.fused_norm is Paddle's fused RMSNorm; unset it for torch")
        if workload.train.precision == "fp16" and par.tensor_parallel_degree > 1:
            missing.append("fp16 loss scaling cannot unscale tensor-parallel (DTensor) and replicated gradients "
                           "together; use precision bf16 with tensor parallelism")
        if workload.train.lora_rank and par.tensor_parallel_degree > 1:
            missing.append("LoRA adapters are not split by tensor parallelism yet; use data parallelism or sharding")
        if par.pipeline_parallel_degree > 1 and par.tensor_parallel_degree > 1:
            missing.append("pipeline x tensor parallelism (3-D layouts) is not implemented in training/torch yet")
        if par.pipeline_parallel_degree > 1 and par.sharding in ("none", "stage1") and par.data_degree(world_size) > 1:
            missing.append("data parallelism across pipelines needs sharding stage2 or stage3 (FSDP2 x PP); "
                           "DDP over pipeline stages misses gradients under some schedules")
        return missing


class Paddle(Framework):
    name = "paddle"
    distributions = ("paddlepaddle-gpu", "paddlepaddle")
    launcher = "paddle.distributed.launch"
    tasks = ("pretrain", "finetune", "lora", "micro")  # PPO's loop is torch's (training/torch/ppo_loop.py)

    def layout_unsupported(self, workload: "WorkloadSpec", world_size: int) -> list[str]:
        par, train = workload.parallel, workload.train
        missing = []
        if train.precision == "fp8":
            missing.append("precision fp8: training/paddle has no fp8 path; use fp16 or bf16")
        if workload.debug.grad_noise:
            missing.append("debug.grad_noise perturbs gradients in training/torch only; unset it for paddle")
        if train.lora_rank and (par.tensor_parallel_degree > 1 or par.pipeline_parallel_degree > 1
                                or par.sequence_parallel):
            missing.append("LoRA in training/paddle adapts one model-parallel rank's plain linears: use data "
                           "parallelism or sharding (tensor, sequence and pipeline parallel are not implemented)")
        if workload.data.instruction and par.pipeline_parallel_degree > 1:
            missing.append("instruction data in a Paddle pipeline is not implemented (fleet's PipelineLayer fixes "
                           "its shapes, instruction batches vary in width); use tensor parallelism or sharding")
        if train.compile:
            missing.append("train.compile is torch.compile; Paddle runs eagerly here (unset it)")
        if par.sequence_parallel and par.pipeline_parallel_degree > 1:
            missing.append("sequence_parallel with pipeline parallelism is not implemented in training/paddle "
                           "(its PipelineLayer stages pass whole sequences); use it with tensor parallelism alone")
        if par.pipeline_schedule != "1f1b" and par.pipeline_parallel_degree > 1:
            missing.append(f"pipeline_schedule {par.pipeline_schedule}: fleet's PipelineLayer runs 1f1b here")
        if par.offload and par.sharding != "stage3":
            missing.append("offload with Paddle needs sharding stage3 (group_sharded_parallel offload)")
        return missing

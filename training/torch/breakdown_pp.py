"""The time breakdown of a pipeline-parallel step (``torch.distributed.pipelining``), for training/breakdown.py.

The serialised phases of the other layouts do not apply: a schedule interleaves each stage's forward and backward
chunks with point-to-point sends and receives to its neighbours, so there is no "compute, then communicate"
to cut it into, and a barrier between a stage's chunks would deadlock it. Instead, on the breakdown steps, the
step runs exactly as a measured one (the same ``Pipeline.step``, the same schedule), with a clock on it:

  compute        each of this rank's chunks: ``PipelineStage.forward_one_chunk``, ``backward_one_chunk`` and
                 ``backward_weight_one_chunk`` of each of its stages (the stage objects' public methods, which
                 every schedule calls), and the loss on the last stage (``Pipeline.loss_clock``), each between
                 two synchronisations of this rank's stream, plus ``debug.compute_delay_ms`` and the loss scale
  pipeline_wait  the rest of the schedule's ``step``, timed between two synchronisations: the P2P sends and
                 receives issued and waited for, i.e. the transfers and the bubble (waiting for a neighbour
                 stage's activations or gradients) together, which the wire cannot tell apart without changing
                 the schedule; then a barrier across the pipeline, the drain: a stage that finished its last
                 chunk waits for the stage still in its last backward (the measured loop's loss all-reduce
                 aligns the stages at every step's end the same way)
  communication  the tied embedding's gradient all-reduce between the first and the last stage's ranks (GPT-2),
                 after a barrier (``Collectives``; ``Pipeline.reduce_tied``)

The stream synchronisation (not the whole device's) waits for the chunk's own kernels and for a receive the
stream was made to wait on, never for a send still in flight, so the clock adds no coupling between stages that
the schedule does not have. What the schedule does on the host between chunks (splitting the batch into
micro-batches, merging the last stage's outputs) falls into pipeline_wait; what the compute phase does outside
the schedule (joining the micro-batches, the tied gradients' local sum) into the step's remainder. Each send's
bytes are counted from the P2P operations the stages hand the schedule (``get_fwd_send_ops`` and
``get_bwd_send_ops``).

Not covered: data parallelism across pipelines (FSDP2 on each stage). Its all-gathers run inside the chunks this
clock times as compute and its reduce-scatters in the schedule's reduce-grad step, which it times as waiting;
timing them apart would need a barrier over each stage's data-parallel group inside the schedule, and its
records would mix two group sizes (the data-parallel group's collectives and the tied embedding's pair).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from training.breakdown import Collectives, Phases


def uncovered(parallel) -> Optional[str]:
    """Why this pipeline layout has no breakdown, or None."""
    if parallel.dp_size > 1:
        return ("not measured for pipeline x data parallel: FSDP2's all-gathers and reduce-scatters run inside "
                "the schedule's chunks and its reduce-grad step, which the pipeline's clock times as compute and "
                "waiting, not one by one")
    return None


class StageClock:
    """Times one rank's chunks and the schedule around them (the module docstring says how)."""

    def __init__(self, sync: Callable[[], None], barrier: Callable[[], None], facts: dict):
        self.sync, self.barrier, self._facts = sync, barrier, facts
        self.compute_s = self.wait_s = 0.0
        self.sends = self.send_bytes = 0
        self.last_sends = (0, 0)  # (sends, bytes) of the last step taken
        self._depth = 0  # a chunk inside a chunk is timed once, by the outer one

    def compute(self, call: Callable, *args: Any, **kwargs: Any) -> Any:
        if self._depth:
            return call(*args, **kwargs)
        self.sync()
        began = time.perf_counter()
        self._depth += 1
        try:
            return call(*args, **kwargs)
        finally:
            self._depth -= 1
            self.sync()
            self.compute_s += time.perf_counter() - began

    def schedule(self, step: Callable) -> Callable:
        """``step`` (the schedule's) timed: its time less the chunks inside it, then the drain barrier, is waiting."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            began, chunks = time.perf_counter(), self.compute_s
            out = step(*args, **kwargs)
            self.sync()
            self.barrier()
            self.wait_s += time.perf_counter() - began - (self.compute_s - chunks)
            return out
        return timed

    def counted(self, get_ops: Callable) -> Callable:
        """``get_ops`` (a stage's send operations for one micro-batch), each send counted with its bytes."""
        def ops(*args: Any, **kwargs: Any) -> list:
            out = get_ops(*args, **kwargs)
            self.sends += len(out)
            self.send_bytes += sum(op.tensor.numel() * op.tensor.element_size() for op in out)
            return out
        return ops

    def install(self, pipeline) -> None:
        """On ``pipeline`` (a ``training.torch.pipeline.Pipeline``), from now on."""
        for stage in pipeline.stages:
            for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
                setattr(stage, name, _bound(self.compute, getattr(stage, name)))
            for name in ("get_fwd_send_ops", "get_bwd_send_ops"):
                setattr(stage, name, self.counted(getattr(stage, name)))
        pipeline.loss_clock = self.compute
        pipeline.schedule.step = self.schedule(pipeline.schedule.step)

    def take(self) -> tuple[float, float]:
        """(compute, waiting) seconds since the last take; what was sent meanwhile becomes ``facts``'s."""
        out = (self.compute_s, self.wait_s)
        self.last_sends = (self.sends, self.send_bytes)
        self.compute_s = self.wait_s = 0.0
        self.sends = self.send_bytes = 0
        return out

    def facts(self) -> dict:
        sends, nbytes = self.last_sends
        return {**self._facts, "sends": sends, "send_bytes": nbytes}


def _bound(clock: Callable, method: Callable) -> Callable:
    return lambda *args, **kwargs: clock(method, *args, **kwargs)


def stream_sync(device: torch.device) -> Callable[[], None]:
    """Waits for this rank's current stream (its kernels and the receives it was made to wait on); nothing on a
    CPU, where every operation has finished when it returns."""
    if device.type == "cpu":
        return lambda: None
    return lambda: torch.accelerator.current_stream(device).synchronize()


def phases(worker) -> Phases:
    """``worker``: a TorchWorker with a pipeline and no data parallelism, after its measured steps."""
    spec, parallel = worker.spec, worker.parallel
    pipeline = parallel.pipeline
    par = spec.parallel
    clock = StageClock(stream_sync(worker.torch_device), lambda: dist.barrier(group=pipeline.pp_group), {
        "schedule": par.pipeline_schedule, "ranks": pipeline.size, "stages": pipeline.size * par.stages_per_rank,
        "stages_per_rank": par.stages_per_rank, "micro_batches": pipeline.micro_batches,
        "stage_ids": list(pipeline.stage_ids)})
    clock.install(pipeline)
    inner = None
    if pipeline.tie_group is not None:  # the tied embedding's two halves on two ranks: their gradient all-reduce
        inner = Collectives(lambda: None if worker.on_cpu else worker.synchronize(),
                            lambda: dist.barrier(group=pipeline.tie_group))
        pipeline.reduce_tied = lambda grad: inner.run("allreduce", grad.numel() * grad.element_size(),
                                                      lambda: dist.all_reduce(grad, group=pipeline.tie_group))

    def compute(batches: list) -> None:
        scale = clock.compute(worker.loss_scale, batches)  # instruction data: the global count's all-reduce
        clock.compute(worker.compute_delay)
        parallel.forward_backward(batches, scale, worker.precision, worker.scaler, worker.torch_device)

    def optimize() -> None:
        worker.scaler.step(parallel.optimizer)
        worker.scaler.update()

    return Phases(fetch=worker.fetch, compute=compute, communicate=lambda: [], optimize=optimize,
                  align=lambda: None, finish=lambda: parallel.optimizer.zero_grad(set_to_none=True),
                  group_size=2 if inner else 1, inner=inner, pipeline=clock)

"""Tasks pretrain, finetune and lora: the one timed loop over a framework's ``FrameworkWorker``.

Ranks that split one model replica (tensor x pipeline parallel) share its tokens: each reports its share, so
the sum over ranks is the global batch and tokens/s per device stays honest. After the measured steps,
``train.breakdown_steps`` more, split per phase (training/breakdown.py), or, where the layout's breakdown
leaves the model as it found it (``breakdown_in_warmup``), the last warm-up steps are the breakdown's.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Optional, Union

from training import breakdown
from training.contract import batch, flops, perflog
from training.contract.names import Ranks
from training.contract.spec import WorkerConfig
from training.harness import Ending, FrameworkWorker, StepWork, Task, Workload, peak_memory, synchronize, timed_loop


class TrainTask(Task):
    """One rank's training steps; the framework's operations are ``worker``'s."""

    def __init__(self, cfg: WorkerConfig, ranks: Ranks, worker: FrameworkWorker):
        self.spec, self.ranks, self.worker = cfg.workload, ranks, worker
        self.framework, self.version, self.device = worker.framework, worker.version, worker.device
        self.on_cpu = worker.on_cpu
        self.share = worker.model_parallel_size
        self.memory = self.recompiles = None

    def workload(self) -> Workload:
        spec, worker = self.spec, self.worker
        samples = batch.replica_batch(spec)  # this rank's share of it: summed over ranks, the global batch
        flops_per_token, formula = flops.flops_per_token(spec.model, spec.train)
        return Workload(precision=spec.train.precision, n_params=worker.n_params,
                        trainable_params=worker.trainable_params, flops_per_token=flops_per_token,
                        flop_formula=formula,
                        tokens_per_step=perflog.share_of(samples * batch.sample_tokens(spec), self.share),
                        samples_per_step=perflog.share_of(samples, self.share), data=worker.data_description)

    def environment(self) -> dict:
        return self.worker.environment()

    def records(self) -> Iterator[perflog.Record]:
        worker, share, rank = self.worker, self.share, self.ranks.rank

        def record(step: int, warmup: bool, elapsed: float, ended_at: float, work: StepWork) -> perflog.StepRecord:
            loss, grad_norm = worker.after_step(work)  # untimed: the loss's reduction, the gradient norm's read
            return perflog.StepRecord(
                rank=rank, step=step, warmup=warmup, step_time_s=elapsed,
                tokens=perflog.share_of(work.tokens, share), loss=loss,
                effective_tokens=None if work.effective_tokens is None else perflog.share_of(work.effective_tokens,
                                                                                             share),
                flops=None if work.flops is None else work.flops / share,
                grad_norm=grad_norm if grad_norm is not None and math.isfinite(grad_norm) else None,  # fp16 overflow
                ended_at=ended_at)

        early = breakdown.in_warmup(self.spec.train, worker.breakdown_in_warmup())
        phases: Union[breakdown.Phases, str, None] = None  # built at the first breakdown step: DDP's buckets are set
        timer: Optional[breakdown.Timer] = None  # the warm-up's breakdown steps, where they are in the warm-up

        def step_work(step: int) -> Any:
            nonlocal phases, timer
            if early and step == early.start:
                phases = worker.breakdown_phases()
                if not isinstance(phases, str):
                    timer = breakdown.Timer(rank, phases, lambda: synchronize(worker),
                                            breakdown.method(breakdown.WARMUP))
            return timer.step() if timer is not None and step in early else worker.train_step()

        yield from timed_loop(self.spec, rank, worker, step_work, record)
        self.memory = peak_memory(worker)  # the measured steps' peaks and compiles, before the breakdown steps
        self.recompiles = worker.recompiles()
        steps = self.spec.train.breakdown_steps
        if timer is not None:
            yield timer.record()
        else:  # after the measured steps, or none (a string: why)
            phases = (phases or worker.breakdown_phases()) if steps else ""
            yield breakdown.measure(steps, rank, phases, lambda: synchronize(worker))

    def ending(self) -> Ending:
        return Ending(steps=self.spec.train.steps, memory=self.memory, recompiles=self.recompiles)

    def close(self) -> None:
        self.worker.close()


def over(open_worker: Callable[[WorkerConfig, Ranks], FrameworkWorker]) -> Callable[[WorkerConfig, Ranks], Task]:
    """The training task over a framework's operations, for ``harness.run(cfg, over(TorchWorker))``."""
    return lambda cfg, ranks: TrainTask(cfg, ranks, open_worker(cfg, ranks))

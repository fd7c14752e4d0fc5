"""The one timed loop every worker runs, whatever the framework and the device.

Each step is timed on the wall clock between two device synchronisations;
warm-up steps are run and recorded but flagged, and the orchestrator leaves them
out of every figure. Perf records are written after the second clock read, so
writing them costs nothing inside a measured step. Framework-neutral (no torch,
no paddle): a framework brings only its operations, as a ``FrameworkWorker``, so
ranks, records, fault injection and the node's environment mean the same for all.
"""
from __future__ import annotations

import math
import os
import resource
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from training.contract import flops, perflog
from training import breakdown, plugins
from training.contract.names import ENV_NODE_RANK
from training.faults import OOM_REQUEST_BYTES, check_faults, exit_after_end
from training.contract.spec import DeviceSpec, WorkerConfig, WorkloadSpec
from training.sysinfo import memory_total_bytes, node_environment, process_age_s
from training.unsupported import UnsupportedOnDevice


@dataclass(frozen=True)
class RankVariables:
    """The environment variables a framework's launcher sets in each process it starts."""

    rank: str
    world_size: str
    local_rank: str
    node_rank: Optional[str] = None  # unset, or a launcher that does not say: contract.ENV_NODE_RANK


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    local_rank: int
    node_rank: int


def read_ranks(variables: RankVariables, environ: Mapping[str, str] = os.environ) -> Ranks:
    node_rank = environ.get(variables.node_rank) if variables.node_rank else None
    return Ranks(rank=int(environ.get(variables.rank, 0)), world_size=int(environ.get(variables.world_size, 1)),
                 local_rank=int(environ.get(variables.local_rank, 0)),
                 node_rank=int(node_rank if node_rank is not None else environ.get(ENV_NODE_RANK, 0)))


@dataclass(frozen=True)
class StepWork:
    """What one optimizer step did on this rank's model replica; the harness takes this rank's share."""

    loss: Any  # the framework's tensor: read only after the clock stops
    tokens: int  # input tokens of the step, padding included
    effective_tokens: Optional[int] = None  # instruction data: those that are not padding
    flops: Optional[float] = None  # instruction data: model FLOPs of the non-padding tokens, each at its batch's width


@dataclass(frozen=True)
class DeviceMemory:
    peak_allocated: int  # the allocator's peak of memory handed to tensors
    peak_reserved: Optional[int]  # its peak of memory held, cached blocks included
    total: Optional[int]  # the device's memory


class FrameworkWorker(ABC):
    """A framework's operations on one rank, set up (device, groups, model, data) by its constructor.

    Attributes the constructor sets: ``framework`` and ``version`` (its name and version), ``device``
    (how it names this rank's device), ``on_cpu``, ``n_params`` and ``trainable_params``,
    ``model_parallel_size`` (ranks that share one replica's tokens: tensor x pipeline), ``data_description``.
    """

    framework: str
    version: str
    device: str
    on_cpu: bool
    n_params: int
    trainable_params: int
    model_parallel_size: int = 1
    data_description: dict

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for the device's queued work (never called on a CPU)."""

    @abstractmethod
    def train_step(self) -> StepWork:
        """Forward, backward and optimizer step over one step's micro-batches: the timed region."""

    @abstractmethod
    def after_step(self, work: StepWork) -> tuple[float, Optional[float]]:
        """Untimed: the loss over the global batch and the gradient norm (None where not computed); zero
        the gradients."""

    @abstractmethod
    def memory(self) -> DeviceMemory:
        """The device allocator's peaks (never called on a CPU: the harness reads the process's RSS)."""

    @abstractmethod
    def reset_peak_memory(self) -> None:
        """Forget the allocator's peaks so far (at the first measured step: warm-up peaks are not the
        steady state's); never called on a CPU."""

    @abstractmethod
    def environment(self) -> dict:
        """Facts about the framework and the device, for the node's environment."""

    @abstractmethod
    def allocate(self, nbytes: int) -> object:
        """Ask the device's allocator for ``nbytes`` (``debug.oom_at_step``: a real out-of-memory)."""

    def breakdown_phases(self) -> Union[breakdown.Phases, str]:
        """The phases of a step for the time breakdown (training/breakdown.py), or why there are none."""
        return f"not measured for {self.framework}"

    def breakdown_in_warmup(self) -> bool:
        """Whether this layout's breakdown phases leave the model as they found it (no timing hook stays on it)
        and their ``compute`` returns the step's ``StepWork``: then the breakdown steps can be warm-up steps
        (``breakdown.in_warmup``)."""
        return False

    def recompiles(self) -> Optional[int]:
        """Graphs compiled after the warm-up steps (inside measured steps), or None when not compiling."""
        return None

    def close(self) -> None:
        """After the end record: tear down process groups."""


def run(cfg: WorkerConfig, variables: RankVariables,
        open_worker: Callable[[WorkerConfig, Ranks], FrameworkWorker]) -> None:
    """Load the kind's plugin, set up the framework's worker, and train: start, step, ..., end records."""
    ranks = read_ranks(variables)
    try:
        plugin = plugins.load(cfg.runtime.device)
        if plugin is not None:
            plugin.setup(cfg.runtime.device)  # before the framework touches the device
        worker = open_worker(cfg, ranks)
        _train(cfg, ranks, worker, plugin)
    except UnsupportedOnDevice as exc:
        exc.rank = ranks.rank  # the entry point reports which rank found out
        raise
    worker.close()


def _train(cfg: WorkerConfig, ranks: Ranks, worker: FrameworkWorker, plugin) -> None:
    spec = cfg.workload
    share = worker.model_parallel_size
    # Ranks that split one model replica share its tokens: each reports its share, so the sum over
    # ranks is the global batch and tokens/s per device stays honest.
    samples = spec.train.micro_batch_size * spec.train.gradient_accumulation_steps
    tokens_per_step = perflog.share_of(samples * spec.model.seq_len, share)
    flops_per_token, flop_formula = flops.flops_per_token(spec.model, spec.train)
    perflog.emit(perflog.StartRecord(
        rank=ranks.rank, local_rank=ranks.local_rank, node_rank=ranks.node_rank, world_size=ranks.world_size,
        framework=worker.framework, framework_version=worker.version, device=worker.device,
        precision=spec.train.precision, n_params=worker.n_params, flops_per_token=float(flops_per_token),
        flop_formula=flop_formula, tokens_per_step=tokens_per_step, samples_per_step=perflog.share_of(samples, share),
        environment=node_facts(cfg.runtime.device, worker, plugin) if ranks.local_rank == 0 else None,
        trainable_params=worker.trainable_params, data=worker.data_description, init_time_s=process_age_s(),
    ))

    def record(step: int, warmup: bool, elapsed: float, ended_at: float, work: StepWork) -> perflog.StepRecord:
        loss, grad_norm = worker.after_step(work)  # untimed: the loss's reduction, the gradient norm's read
        return perflog.StepRecord(
            rank=ranks.rank, step=step, warmup=warmup, step_time_s=elapsed,
            tokens=perflog.share_of(work.tokens, share), loss=loss,
            effective_tokens=None if work.effective_tokens is None else perflog.share_of(work.effective_tokens, share),
            flops=None if work.flops is None else work.flops / share,
            grad_norm=grad_norm if grad_norm is not None and math.isfinite(grad_norm) else None,  # fp16 overflow
            ended_at=ended_at)

    early = breakdown.in_warmup(spec.train, worker.breakdown_in_warmup())
    phases: Union[breakdown.Phases, str, None] = None  # built at the first breakdown step: DDP's buckets are set
    timer: Optional[breakdown.Timer] = None  # the warm-up's breakdown steps, where they are in the warm-up

    def step_work(step: int) -> Any:
        nonlocal phases, timer
        if early and step == early.start:
            phases = worker.breakdown_phases()
            if not isinstance(phases, str):
                timer = breakdown.Timer(ranks.rank, phases, lambda: synchronize(worker),
                                        breakdown.method(breakdown.WARMUP))
        return timer.step() if timer is not None and step in early else worker.train_step()

    timed_loop(spec, ranks.rank, worker, step_work, record)

    peak, reserved, total, kind = peak_memory(worker)
    recompiles = worker.recompiles()  # the measured steps' peaks and compiles, before the breakdown steps
    steps = spec.train.breakdown_steps
    if timer is not None:
        perflog.emit(timer.record())
    else:  # after the measured steps, or none (a string: why)
        phases = (phases or worker.breakdown_phases()) if steps else ""
        perflog.emit(breakdown.measure(steps, ranks.rank, phases, lambda: synchronize(worker)))
    perflog.emit(perflog.EndRecord(rank=ranks.rank, steps=spec.train.steps, peak_memory_bytes=peak,
                                   memory_total_bytes=total, memory_kind=kind, peak_memory_reserved_bytes=reserved,
                                   recompiles=recompiles))
    exit_after_end(spec.debug, ranks.rank)


def timed_loop(spec: WorkloadSpec, rank: int, worker: FrameworkWorker, step_work: Callable[[int], Any],
               record: Callable[[int, bool, float, float, Any], perflog.StepRecord]) -> None:
    """The one timed loop, for every task that has steps (pretraining, finetuning, LoRA, PPO).

    Each of ``train.steps`` steps: injected faults, a device synchronisation, the clock, ``step_work(step)``,
    a second synchronisation, the clock again (and the wall clock, where the monitor's samples fall); then,
    untimed, ``record(step, warmup, seconds, ended_at, work)`` makes the step record, the memory limit of
    ``debug`` is checked, and the record is written. Memory peaks, like times, are the measured steps': they are
    reset when the first measured step starts."""
    for step in range(spec.train.steps):
        if step == spec.train.warmup_steps:
            reset_peak_memory(worker)
        check_faults(spec.debug, rank, step, worker.allocate)
        synchronize(worker)
        started = time.perf_counter()
        work = step_work(step)
        synchronize(worker)
        elapsed = time.perf_counter() - started
        ended_at = time.time()
        made = record(step, step < spec.train.warmup_steps, elapsed, ended_at, work)
        if spec.debug.memory_limit_mib is not None:  # over it: the step ends in the framework's own OOM
            check_memory_limit(spec.debug.memory_limit_mib, rank, step, worker)
        perflog.emit(made)


def timed(worker: FrameworkWorker, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and its seconds between two device synchronisations: a phase inside a step."""
    synchronize(worker)
    started = time.perf_counter()
    result = fn(*args)
    synchronize(worker)
    return result, time.perf_counter() - started


def check_memory_limit(limit_mib: float, rank: int, step: int, worker: FrameworkWorker) -> None:
    """``debug.memory_limit_mib``: above the limit, the framework's own out-of-memory error (the allocation
    ``debug.oom_at_step`` makes), so the round ends and is classified exactly as a real one."""
    peak = peak_memory(worker)[0]
    if peak > limit_mib * 2**20:
        print(f"accelbench: rank {rank} step {step}: peak memory {peak / 2**20:.1f} MiB is above "
              f"debug.memory_limit_mib {limit_mib:g}: out of memory", file=sys.stderr, flush=True)
        worker.allocate(OOM_REQUEST_BYTES)


def synchronize(worker: FrameworkWorker) -> None:
    if not worker.on_cpu:  # a CPU runs each operation before returning
        worker.synchronize()


def reset_peak_memory(worker: FrameworkWorker) -> None:
    if not worker.on_cpu:
        worker.reset_peak_memory()
        return
    try:  # Linux: "5" resets the process's peak resident set (VmHWM) to its current size
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass  # then the peak includes the warm-up (ru_maxrss cannot be reset)


def peak_rss() -> int:
    """The process's peak resident set since the last reset (VmHWM), else since it started (ru_maxrss)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def peak_memory(worker: FrameworkWorker) -> tuple[int, Optional[int], Optional[int], str]:
    """(peak, reserved peak, total, kind): the allocator's figures on a device, the process's on a CPU."""
    if worker.on_cpu:
        return peak_rss(), None, memory_total_bytes(), "rss"
    memory = worker.memory()
    return memory.peak_allocated, memory.peak_reserved, memory.total, "allocated"


def node_facts(device: DeviceSpec, worker: FrameworkWorker, plugin: Optional[plugins.WorkerPlugin]) -> dict:
    """The node's environment as local rank 0 reports it: host, framework, accelerator kind, vendor facts."""
    facts = {**node_environment(), **worker.environment(), "accelerator_kind": device.kind}
    if device.visible_devices_env:
        facts["visible_devices"] = {device.visible_devices_env: os.environ.get(device.visible_devices_env)}
    if plugin is not None:
        facts.update(plugin.environment())
    return facts

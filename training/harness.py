"""One worker lifecycle and one timed loop, whatever the task, the framework and the device.

Every task (pretraining, finetuning and LoRA: training/train_task.py; PPO: training/ppo_task.py;
micro-benchmarks: training/micro/case.py) is a ``Task`` run by ``run``: the ranks read once from the launcher's
variables (training/contract/names.py), the vendor's worker plugin loaded and set up before the framework
touches the device, the start and end records written here and nowhere else.

Each step is timed on the wall clock between two device synchronisations;
warm-up steps are run and recorded but flagged, and the orchestrator leaves them
out of every figure. Perf records are written after the second clock read, so
writing them costs nothing inside a measured step. Framework-neutral (no torch,
no paddle): a framework brings only its operations, as a ``FrameworkWorker``, so
ranks, records, fault injection and the node's environment mean the same for all.
"""
from __future__ import annotations

import os
import resource
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Union

from training.contract import perflog
from training import breakdown, collector, plugins
from training.contract.names import RankVariables, Ranks, read_ranks
from training.faults import OOM_REQUEST_BYTES, check_faults, exit_after_end
from training.contract.spec import DeviceSpec, WorkerConfig, WorkloadSpec
from training.sysinfo import memory_total_bytes, node_environment, process_age_s
from training.unsupported import UnsupportedOnDevice


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

    def breakdown_in_warmup(self) -> bool:
        """Whether this layout's breakdown phases leave the model as they found it (no timing hook stays on it)
        and their ``compute`` returns the step's ``StepWork``: then the breakdown steps can be warm-up steps
        (``breakdown.in_warmup``)."""
        return False

    def breakdown_phases(self) -> Union[breakdown.Phases, str]:
        """The phases of a step for the time breakdown (training/breakdown.py), or why there are none."""
        return f"not measured for {self.framework}"

    def recompiles(self) -> Optional[int]:
        """Graphs compiled after the warm-up steps (inside measured steps), or None when not compiling."""
        return None

    def close(self) -> None:
        """After the end record: tear down process groups."""


@dataclass(frozen=True)
class Workload:
    """What a task does per step on this rank, as its start record says it."""

    precision: str
    n_params: int
    trainable_params: int
    flops_per_token: float
    flop_formula: str
    tokens_per_step: int  # this rank's share
    samples_per_step: Optional[float] = None  # this rank's share; summed over ranks: the global batch
    data: Optional[dict] = None  # what the tokens are


@dataclass(frozen=True)
class Ending:
    """What the end record says: steps run and the measured steps' peaks (``peak_memory``)."""

    steps: int
    memory: tuple[int, Optional[int], Optional[int], str]
    recompiles: Optional[int] = None


class Task(ABC):
    """One task's work on one rank (pretraining, finetuning, LoRA, PPO, a micro-benchmark), between the start and
    end records the harness writes. Set up by its constructor (device, groups, models, data) after the vendor's
    plugin ran; attributes: ``framework``, ``version``, ``device`` and ``on_cpu``, as ``FrameworkWorker``'s."""

    framework: str
    version: str
    device: str
    on_cpu: bool

    @abstractmethod
    def workload(self) -> Workload:
        """The start record's account of a step."""

    @abstractmethod
    def environment(self) -> dict:
        """Facts about the framework and the device, for the node's environment."""

    @abstractmethod
    def records(self) -> Iterator[perflog.Record]:
        """The task's work, as the records it makes (steps, figures, breakdowns), each yielded once made."""

    @abstractmethod
    def ending(self) -> Ending:
        """After ``records``: the end record's figures."""

    def close(self) -> None:
        """After the end record: tear down process groups, stop threads."""


def run(cfg: WorkerConfig, open_task: Callable[[WorkerConfig, Ranks], Task],
        variables: Optional[RankVariables] = None) -> None:
    """The one lifecycle of a worker process, whatever the task: read the ranks (the framework's launcher
    variables, training/contract/names.py), run the kind's plugin setup before the framework touches the device,
    open the task, write the start record, the task's records, the end record; then close."""
    ranks = read_ranks(variables or cfg.runtime.framework)
    try:
        plugin = plugins.load(cfg.runtime.device)
        if plugin is not None:
            plugin.setup(cfg.runtime.device)  # before the framework touches the device
        task = open_task(cfg, ranks)
        perflog.emit(start_record(cfg, ranks, task, plugin))
        for record in task.records():
            perflog.emit(record)
        collector.resume()  # a task without steps (micro) measured with it off
        ending = task.ending()
    except UnsupportedOnDevice as exc:
        exc.rank = ranks.rank  # the entry point reports which rank found out
        raise
    peak, reserved, total, kind = ending.memory
    perflog.emit(perflog.EndRecord(rank=ranks.rank, steps=ending.steps, peak_memory_bytes=peak,
                                   memory_total_bytes=total, memory_kind=kind, peak_memory_reserved_bytes=reserved,
                                   recompiles=ending.recompiles))
    exit_after_end(cfg.workload.debug, ranks.rank)
    task.close()


def start_record(cfg: WorkerConfig, ranks: Ranks, task: Task,
                 plugin: Optional[plugins.WorkerPlugin]) -> perflog.StartRecord:
    work = task.workload()
    return perflog.StartRecord(
        rank=ranks.rank, local_rank=ranks.local_rank, node_rank=ranks.node_rank, world_size=ranks.world_size,
        framework=task.framework, framework_version=task.version, device=task.device, precision=work.precision,
        n_params=work.n_params, flops_per_token=float(work.flops_per_token), flop_formula=work.flop_formula,
        tokens_per_step=work.tokens_per_step, samples_per_step=work.samples_per_step,
        environment=node_facts(cfg.runtime.device, task, plugin) if ranks.local_rank == 0 else None,
        trainable_params=work.trainable_params, data=work.data, init_time_s=process_age_s())


def timed_loop(spec: WorkloadSpec, rank: int, worker: FrameworkWorker, step_work: Callable[[int], Any],
               record: Callable[[int, bool, float, float, Any], perflog.StepRecord]) -> Iterator[perflog.StepRecord]:
    """The one timed loop, for every task that has steps (pretraining, finetuning, LoRA, PPO).

    Each of ``train.steps`` steps: injected faults, a device synchronisation, the clock, ``step_work(step)``,
    a second synchronisation, the clock again (and the wall clock, where the monitor's samples fall); then,
    untimed, ``record(step, warmup, seconds, ended_at, work)`` makes the step record, the memory limit of
    ``debug`` is checked, and the record is yielded (the harness writes it before the next step starts). Memory peaks, like times, are the measured steps': they are
    reset when the first measured step starts."""
    for step in range(spec.train.steps):
        if step == spec.train.warmup_steps:
            collector.resume()  # training/collector.py: off since the worker's entry
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
        yield made


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


def node_facts(device: DeviceSpec, worker: Union[FrameworkWorker, Task], plugin: Optional[plugins.WorkerPlugin]) -> dict:
    """The node's environment as local rank 0 reports it: host, framework, accelerator kind, vendor facts."""
    facts = {**node_environment(), **worker.environment(), "accelerator_kind": device.kind}
    if device.visible_devices_env:
        facts["visible_devices"] = {device.visible_devices_env: os.environ.get(device.visible_devices_env)}
    if plugin is not None:
        facts.update(plugin.environment())
    return facts

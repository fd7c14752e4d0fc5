"""Task ppo: the RLHF loop ColossalAI chat's benchmark times, framework-neutral; the framework's worker (torch:
training/torch/ppo_loop.py's ``PPOWorker``) brings the roles, experience making and learning.

Per episode, ``max_timesteps`` experience makings; every ``update_timesteps`` of them, ``max_epochs`` passes
of learning over what was collected (one perf step record per learning update: its experience making and
its learning). Each phase is timed between device synchronisations; the first episode is warm-up and is
left out of the phase figures (and flagged warm-up in the step records). Figures: perf records of kind
``figure`` per rank, combined by the orchestrator (``run_benchmarks/results/figures/task.py``). After the measured
updates, ``train.breakdown_steps`` more, split per phase by the worker: one breakdown record per phase.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from training import harness
from training.contract import batch, flops, perflog
from training.contract.names import Ranks
from training.contract.spec import WorkerConfig


class PPOTask(harness.Task):
    """One rank's learning updates over ``worker``'s operations (``experience``, ``collect``, ``learn``,
    ``mean_loss``, ``breakdown``, and a ``FrameworkWorker``'s device hooks)."""

    def __init__(self, cfg: WorkerConfig, ranks: Ranks, worker: Any):
        self.spec, self.ranks, self.worker = cfg.workload, ranks, worker
        self.framework, self.version, self.device, self.on_cpu = (worker.framework, worker.version, worker.device,
                                                                  worker.on_cpu)
        self.ppo = worker.ppo
        self.per_update = batch.replica_batch(cfg.workload)  # sequences made and learned from, on this rank
        self.memory = None

    def workload(self) -> harness.Workload:
        ppo, phase, s = self.ppo, self.worker.phase, batch.sample_tokens(self.spec)
        per_sample = phase["generation"].total + phase["forwards"].total + ppo.max_epochs * phase["learning"].total
        return harness.Workload(precision=self.spec.train.precision, n_params=self.worker.n_params,
                                trainable_params=self.worker.trainable_params, flops_per_token=per_sample / s,
                                flop_formula=flops.PPO_FORMULA, tokens_per_step=self.per_update * s,
                                samples_per_step=self.per_update, data=self.worker.data_description)

    def environment(self) -> dict:
        return self.worker.environment()

    def records(self) -> Iterator[perflog.Record]:
        worker, ppo, rank = self.worker, self.ppo, self.ranks.rank
        clocks = {"experience": 0.0, "learning": 0.0, "iteration": 0.0}  # the measured steps' seconds

        def update(step: int) -> tuple:
            """One learning update: experience made ``update_timesteps`` times, then learned from; each phase
            timed between synchronisations for its own figures, the whole step by the timed loop."""
            made, experience_s = [], 0.0
            for _ in range(ppo.update_timesteps):
                experience, seconds = harness.timed(worker, worker.experience)
                made.append(experience)
                experience_s += seconds
            losses, learning_s = harness.timed(worker, worker.learn, worker.collect(made))
            return losses, experience_s, learning_s

        def record(step: int, warmup: bool, elapsed: float, ended_at: float, work: tuple) -> perflog.StepRecord:
            losses, experience_s, learning_s = work
            if not warmup:
                clocks["experience"] += experience_s
                clocks["learning"] += learning_s
                clocks["iteration"] += elapsed
            return perflog.StepRecord(rank=rank, step=step, warmup=warmup, step_time_s=elapsed,
                                      tokens=self.per_update * batch.sample_tokens(self.spec),
                                      loss=worker.mean_loss(losses),
                                      ended_at=ended_at)

        # train.steps = episodes x updates per episode
        yield from harness.timed_loop(self.spec, rank, worker, update, record)
        measured = (ppo.num_episodes - 1) * ppo.updates_per_episode * self.per_update  # samples made per rank
        yield from phase_figures(worker, clocks, measured)
        self.memory = harness.peak_memory(worker)  # the measured updates' peak, before the breakdown's
        yield from worker.breakdown(self.spec.train.breakdown_steps, lambda: harness.synchronize(worker))

    def ending(self) -> harness.Ending:
        return harness.Ending(steps=self.spec.train.steps, memory=self.memory)

    def close(self) -> None:
        self.worker.close()


def over(open_worker: Callable[[WorkerConfig, Ranks], Any]) -> Callable[[WorkerConfig, Ranks], harness.Task]:
    """The PPO task over a framework's PPO operations, for ``harness.run(cfg, over(PPOWorker))``."""
    return lambda cfg, ranks: PPOTask(cfg, ranks, open_worker(cfg, ranks))


def phase_figures(worker: Any, clocks: dict, samples: int) -> list[perflog.FigureRecord]:
    """Each phase's throughput on this rank (summed over ranks for the total, averaged for per device) and its
    measured seconds (``<phase>.time_s``, averaged: the reports' time split per phase)."""
    ppo, phase, rank = worker.ppo, worker.phase, worker.ranks.rank
    learned = samples * ppo.max_epochs
    exp_flops = samples * (phase["generation"].total + phase["forwards"].total)
    exp_attention = samples * (phase["generation"].attention + phase["forwards"].attention)
    exp_ref = samples * (phase["generation"].reference + phase["forwards"].reference)
    values = {
        "experience.samples_per_s": (samples / clocks["experience"], "samples/s"),
        "experience.generated_tokens_per_s": (samples * ppo.generation_length / clocks["experience"], "tokens/s"),
        "experience.tflops": (flops.tflop_per_s(exp_flops, clocks["experience"]), "TFLOP/s"),
        "experience.tflops_attention_part": (flops.tflop_per_s(exp_attention, clocks["experience"]), "TFLOP/s"),
        "experience.tflops_reference": (flops.tflop_per_s(exp_ref, clocks["experience"]), "TFLOP/s"),
        "learning.samples_per_s": (learned / clocks["learning"], "samples/s"),
        "learning.tokens_per_s": (learned * ppo.total_length / clocks["learning"], "tokens/s"),
        "learning.tflops": (flops.tflop_per_s(learned * phase["learning"].total, clocks["learning"]), "TFLOP/s"),
        "learning.tflops_attention_part": (flops.tflop_per_s(learned * phase["learning"].attention,
                                                             clocks["learning"]), "TFLOP/s"),
        "learning.tflops_reference": (flops.tflop_per_s(learned * phase["learning"].reference, clocks["learning"]),
                                      "TFLOP/s"),
        "iteration.samples_per_s": (samples / clocks["iteration"], "samples/s"),
    }
    records = []
    for name, (value, unit) in values.items():
        formula = flops.PPO_REFERENCE_FORMULA if name.endswith("_reference") else flops.PPO_FORMULA
        if name.endswith("_attention_part"):
            formula = "the attention score and value products alone, of " + flops.PPO_FORMULA
        records.append(perflog.FigureRecord(rank=rank, name=name, value=value, unit=unit, reduce="sum",
                                            formula=formula if "tflops" in name else None))
        records.append(perflog.FigureRecord(rank=rank, name=name + "_per_device", value=value, unit=unit,
                                            reduce="mean"))
    for part in ("experience", "learning", "iteration"):  # the seconds the rates above divide by: the time split
        records.append(perflog.FigureRecord(rank=rank, name=f"{part}.time_s", value=clocks[part], unit="s",
                                            better="lower", reduce="mean"))
    return records  # peak memory: the end record's, as every task's (harness.peak_memory), not a figure of its own

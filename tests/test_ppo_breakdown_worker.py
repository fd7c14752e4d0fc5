"""PPO's measured time breakdown per phase on real torch ranks (gloo on the CPU): experience making and learning,
each split as training/torch/ppo_breakdown.py says, injected costs landing where they belong.

One spawn of two ranks measures, worker after worker on the same process group, plain DDP, DDP with every debug
delay set (the compute delay on rank 1), and ZeRO-2 (FSDP2) plain and with a collective delay, in the spawn of two
ranks tests/torch_pairs.py shares among the modules that look inside workers, so the tests pay for no start of
torch of their own. Each comparison takes the fastest of the breakdown updates: load only ever adds time, a delay
adds its own.
"""
from __future__ import annotations

import time

import pytest


MODEL = dict(n_layer=2, n_head=2, d_model=32, vocab_size=128, seq_len=32)
TRAIN = dict(micro_batch_size=2, steps=2, warmup_steps=1)
PPO = dict(experience_batch_size=2, num_episodes=2, max_timesteps=1, update_timesteps=1, max_epochs=1,
           prompt_length=8, generation_length=4)
pytestmark = pytest.mark.e2e  # starts real ranks (tests/conftest.py runs it in the in-process lane)
UPDATES = 3
# Delays well above what a loaded machine adds to this tiny model's parts (the suite runs in lanes on 2 cores)
COLLECTIVE_MS, DATA_MS, COMPUTE_MS = 250.0, 100.0, 400.0
SHARDED_MS = 100.0  # per collective: FSDP2 runs dozens per update


def ppo_config(parallel: dict | None = None, **debug):
    from training.contract.spec import WorkerConfig

    workload = {"task": "ppo", "model": MODEL, "train": TRAIN, "ppo": PPO, "parallel": parallel or {},
                "debug": debug}
    return WorkerConfig.model_validate({"workload": workload, "runtime": {
        "case_name": "test", "run_id": "test", "round": 1, "framework": "torch", "device": {"kind": "cpu"}}})


def _measure(rank: int, world: int, cfg) -> dict:
    from training.harness import Ranks
    from training.torch import ppo_breakdown
    from training.torch.ppo_loop import PPOWorker

    worker = PPOWorker(cfg, Ranks(rank=rank, world_size=world, local_rank=rank, node_rank=0))
    for _ in range(2):  # measured updates first (a round has at least 2): DDP rebuilds its buckets at the second
        worker.learn(worker.experience())
    began = time.perf_counter()
    records = ppo_breakdown.measure(worker, UPDATES, lambda: None)
    return {"records": {r.phase: r for r in records}, "wall_s": time.perf_counter() - began, "worker": worker}


def _in_turn(rank: int, world: int, configs: list) -> list:
    done = [_measure(rank, world, cfg) for cfg in configs]
    for one in reversed(done):  # on tests/torch_pairs.py's process group, left to it
        one["worker"].close()
    return [{**one["records"], "wall_s": one["wall_s"]} for one in done]


def _configs() -> dict:
    return {"ddp": ppo_config(), "ddp_delayed": ppo_config(collective_delay_ms=COLLECTIVE_MS,
                                                          data_fetch_delay_ms=DATA_MS, compute_delay_ms=COMPUTE_MS,
                                                          fail_rank=1),
            "stage2": ppo_config({"sharding": "stage2"}),
            "stage2_delayed": ppo_config({"sharding": "stage2"}, collective_delay_ms=SHARDED_MS)}


def two_torch_ranks():
    """This module's part of tests/torch_pairs.py's shared spawn of two ranks."""
    return _in_turn, list(_configs().values())


@pytest.fixture(scope="module")
def records(torch_pairs) -> dict:
    """Per name, the two ranks' records by phase (tests/torch_pairs.py: one spawn for every such module)."""
    ranks = [rank["test_ppo_breakdown_worker"] for rank in torch_pairs]
    return {name: (ranks[0][i], ranks[1][i]) for i, name in enumerate(_configs())}


def fastest(record, phase: str) -> float:
    return min(getattr(record, phase))


def test_one_process_has_no_communication_and_its_parts_add_up_to_the_update():
    """The phases' parts add up to each phase, and the phases to the serialised update (timed around it here):
    within 5 % + 5 ms (what lies between the synchronisations: Python, the records' bookkeeping). Nothing is
    counted twice in any update; the gap left uncounted is checked on the update where it is smallest, since a
    loaded machine (the suite's three lanes on 2 cores) only ever stretches it (one CI run: 12.6 ms of 137)."""
    one = _measure(0, 1, ppo_config())  # in this process: one rank needs no process group
    experience, learning = one["records"]["experience"], one["records"]["learning"]
    assert experience.steps == learning.steps == UPDATES and experience.group_size == 1
    for record in (experience, learning):
        assert record.not_measured is None and record.bucket_bytes == [] and record.collective_ops == []
        assert all(c < 0.005 for c in record.communication_s) and all(c > 0 for c in record.compute_s)
        gaps = []
        for i in range(UPDATES):
            parts = sum(getattr(record, n)[i] for n in ("data_s", "compute_s", "wait_s", "communication_s",
                                                        "optimizer_s"))
            assert parts <= record.step_s[i] * 1.001 + 1e-4  # nothing counted twice
            gaps.append((record.step_s[i] - parts, record.step_s[i]))
            assert sum(v[i] for v in record.compute_parts.values()) == pytest.approx(record.compute_s[i], rel=1e-9)
        gap, step = min(gaps)
        assert gap <= 0.05 * step + 0.005, gaps
    assert set(experience.compute_parts) == {"generation", "scoring"}
    assert set(learning.compute_parts) == {"actor", "critic"}
    whole = sum(experience.step_s) + sum(learning.step_s)
    assert whole == pytest.approx(one["wall_s"], rel=0.05, abs=0.005 * UPDATES)


def test_a_collective_delay_grows_learnings_communication_and_a_compute_delay_names_the_straggler(records):
    (a0, a1), (b0, b1) = records["ddp"], records["ddp_delayed"]
    learning, plain = b0["learning"], a0["learning"]
    # DDP: one all-reduce per bucket of the actor's, then of the critic's gradients; experience has none
    assert learning.collective_ops == ["allreduce"] * len(learning.bucket_bytes) and len(learning.bucket_bytes) >= 2
    assert learning.bucket_bytes == plain.bucket_bytes == b1["learning"].bucket_bytes and learning.group_size == 2
    assert b0["experience"].bucket_bytes == [] and fastest(b0["experience"], "communication_s") < 0.05
    collectives = len(learning.bucket_bytes)
    delay = collectives * COLLECTIVE_MS / 1000
    grew = fastest(learning, "communication_s") - fastest(plain, "communication_s")
    assert abs(grew - delay) <= 0.2 * delay, (plain.communication_s, learning.communication_s)
    assert fastest(learning, "compute_s") - fastest(plain, "compute_s") < 0.5 * COLLECTIVE_MS / 1000
    # the data delay lands in experience's data (one making per update here)
    assert fastest(b0["experience"], "data_s") - fastest(a0["experience"], "data_s") >= 0.8 * DATA_MS / 1000
    # rank 1's compute delay: in its own compute (one per making, one per role's forward+backward) ...
    assert fastest(b1["experience"], "compute_s") >= COMPUTE_MS / 1000
    assert fastest(b1["learning"], "compute_s") >= 2 * COMPUTE_MS / 1000
    assert min(b1["experience"].compute_parts["generation"]) >= COMPUTE_MS / 1000
    # ... and rank 0 waits for it in each phase's own barriers: its compute stays short, its compute and wait
    # together last at least the delays of that phase (load on rank 0 only shifts time from wait to compute)
    for phase, delays in (("experience", 1), ("learning", 2)):
        mine = b0[phase]
        assert fastest(mine, "compute_s") < 0.5 * delays * COMPUTE_MS / 1000
        assert min(w + c for w, c in zip(mine.wait_s, mine.compute_s)) >= 0.9 * delays * COMPUTE_MS / 1000
    from run_benchmarks.results.breakdown.step import measured

    for phase in ("experience", "learning"):
        assert measured([b0[phase], b1[phase]], None)["straggler"]["rank"] == 1
        assert measured([a0[phase], a1[phase]], None)["per_rank"][1]["compute_s"] < COMPUTE_MS / 1000


def test_fsdp_collectives_inside_each_phase_are_timed_one_by_one(records):
    """ZeRO-2: the actor's all-gathers for generation (``gathered()``) and the critic's in scoring land in
    experience's communication; learning's all-gathers and reduce-scatters in learning's. A delay per collective
    grows each phase's communication by its C x D, not its compute."""
    (plain, _), (delayed, _) = records["stage2"], records["stage2_delayed"]
    for phase, ops in (("experience", {"allgather"}), ("learning", {"allgather", "reducescatter"})):
        p, d = plain[phase], delayed[phase]
        assert set(p.collective_ops) == ops and p.collective_ops == d.collective_ops, p.collective_ops
        delay = len(p.collective_ops) * SHARDED_MS / 1000
        grew = fastest(d, "communication_s") - fastest(p, "communication_s")
        assert abs(grew - delay) <= 0.2 * delay, (phase, p.communication_s, d.communication_s)
        assert fastest(d, "compute_s") - fastest(p, "compute_s") < 0.5 * delay, (phase, p.compute_s, d.compute_s)

"""What each rank's device holds: its share of the model, never the whole of it (real gloo ranks on the CPU).

The model is built on the meta device and materialised only after the layout split it; the parity tests
(tests/test_parity.py) check the values, these the sizes. One spawn of two ranks builds every layout's worker
in turn on one process group (``ranks``), so the tests pay for one start of torch.
"""
from __future__ import annotations

import gc

import pytest

from .torch_ranks import open_worker, run_ranks, worker_config

GPT2_SMALLISH = dict(n_layer=8, n_head=4, d_model=64, vocab_size=256, seq_len=32)
TRAIN = dict(micro_batch_size=2, steps=2, warmup_steps=1)


def live_parameters() -> dict[int, object]:
    """Every parameter alive in this process that holds memory (not on the meta device), by identity."""
    from torch import nn

    gc.collect()
    return {id(o): o for o in gc.get_objects() if isinstance(o, nn.Parameter) and not o.is_meta}


def _pipeline_rank(rank: int, world: int, cfg) -> dict:
    worker = open_worker(rank, world, cfg)
    try:
        stage_names = sorted(n for m in worker.parallel.pipeline.modules for n, _ in m.named_parameters())
        live = sum(p.numel() for p in live_parameters().values())  # before a step: the optimizer's state
        worker.after_step(worker.train_step())
        kept = sum(len(stage.output_chunks) for stage in worker.parallel.pipeline.stages)
        return {"stage_names": stage_names, "no_whole_model": worker.parallel.model is None, "kept_outputs": kept,
                "stage_numel": sum(p.numel() for p in worker.parallel.pipeline.parameters()),
                "live_numel": live, "n_params": worker.n_params}
    finally:
        worker.close()


def _in_turn(rank: int, world: int, jobs: list) -> list:
    """Each ``(function, config)`` in turn on one process group that no worker owns (each closes its own before
    the next is built; the pipeline's comes first, with nothing else alive to count)."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        done = []
        for fn, cfg in jobs:
            done.append(fn(rank, world, cfg))
            gc.collect()
        return done
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> dict:
    """One spawn of two ranks: per layout, what each rank's worker held."""
    from training.contract.spec import ModelSpec
    from training.torch.weights import write_initial_weights

    weights = write_initial_weights(ModelSpec(**GPT2_SMALLISH), seed=7,
                                    path=tmp_path_factory.mktemp("torch-memory") / "init.npz")
    jobs = {"pipeline": (_pipeline_rank, worker_config(GPT2_SMALLISH, {**TRAIN, "gradient_accumulation_steps": 2},
                                                       {"pipeline_parallel_degree": 2}))}
    for offload in (False, True):
        jobs[f"fsdp_offload_{offload}"] = (_fsdp_rank, worker_config(GPT2_SMALLISH, TRAIN,
                                                                     {"sharding": "stage3", "offload": offload}))
    jobs["init_weights"] = (_weights_rank, worker_config(GPT2_SMALLISH, {**TRAIN, "init_weights": str(weights)},
                                                         {"sharding": "stage3"}))
    by_rank = run_ranks(_in_turn, 2, list(jobs.values()))
    return {name: [done[i] for done in by_rank] for i, name in enumerate(jobs)}


def test_each_pipeline_stage_holds_only_its_layers(ranks):
    first, last = ranks["pipeline"]
    blocks = lambda names: sorted({n.split(".")[1] for n in names if n.startswith("blocks.")})  # noqa: E731
    assert blocks(first["stage_names"]) == blocks(last["stage_names"]) == ["0", "1", "2", "3"]  # stage-local
    assert {n for n in first["stage_names"] if not n.startswith("blocks.")} == {"wte.weight", "wpe.weight"}
    assert {n for n in last["stage_names"] if not n.startswith("blocks.")} == {"ln_f.weight", "ln_f.bias",
                                                                               "lm_head.weight"}
    for rank in (first, last):
        assert rank["kept_outputs"] == 0  # the last stage keeps no micro-batch's logits after a step
        assert rank["no_whole_model"]  # no whole model kept beside the stages
        assert rank["live_numel"] == rank["stage_numel"]  # nothing else holds memory: the rest stayed meta
    tied_copy = GPT2_SMALLISH["vocab_size"] * GPT2_SMALLISH["d_model"]
    assert first["stage_numel"] + last["stage_numel"] == first["n_params"] + tied_copy


def allocation_peak(events) -> int:
    """The highest the CPU allocator's live bytes rose above where they started, from profiler memory events."""
    total = peak = 0
    for event in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        total += event.nbytes()
        peak = max(peak, total)
    return peak


def _fsdp_rank(rank: int, world: int, cfg) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        worker = open_worker(rank, world, cfg)
    try:
        params = list(worker.parallel.model.parameters())
        local = [p.to_local() if hasattr(p, "to_local") else p for p in params]
        return {"local_bytes": sum(t.numel() * t.element_size() for t in local),
                "full_bytes": worker.n_params * torch.float32.itemsize,
                "all_sharded": all(hasattr(p, "to_local") for p in params),
                "construction_peak": allocation_peak(prof.profiler.kineto_results.events())}
    finally:
        worker.close()


@pytest.mark.parametrize("offload", [False, True])
def test_fsdp_stage3_ranks_hold_half_the_model_and_never_all_of_it(ranks, offload):
    ranks = ranks[f"fsdp_offload_{offload}"]
    full = ranks[0]["full_bytes"]
    for rank in ranks:
        assert rank["all_sharded"]
        assert rank["local_bytes"] == pytest.approx(full / 2, rel=0.02)  # uneven dim-0 splits: a few rows off
        # Built on meta and materialised after sharding: the allocator never held the whole model (before,
        # every rank built all of it, then sharded it). Its share plus one parameter at a time fits in 3/4.
        assert rank["construction_peak"] < 0.75 * full, rank
    assert sum(r["local_bytes"] for r in ranks) == full


def _weights_rank(rank: int, world: int, cfg) -> dict:
    import numpy as np

    worker = open_worker(rank, world, cfg)
    try:
        with np.load(cfg.workload.train.init_weights) as arrays:
            stored = {name: arrays[name] for name in arrays.files}
        got = {name: p.full_tensor().detach().numpy() for name, p in worker.parallel.model.named_parameters()}
        return {"same": sorted(got) == sorted(stored) and all((got[n] == stored[n]).all() for n in stored)}
    finally:
        worker.close()


def test_init_weights_file_loads_into_every_ranks_shards(ranks):
    assert ranks["init_weights"] == [{"same": True}, {"same": True}]


def test_init_weights_that_do_not_fit_are_refused_by_name(tmp_path):
    from training.contract.spec import ModelSpec
    from training.torch.weights import write_initial_weights

    path = write_initial_weights(ModelSpec(**{**GPT2_SMALLISH, "n_layer": 1}), seed=7, path=tmp_path / "w.npz")
    cfg = worker_config(GPT2_SMALLISH, {**TRAIN, "init_weights": str(path)})
    with pytest.raises(ValueError, match=r"does not fit the model: missing \['blocks.1"):
        open_worker(0, 1, cfg)


def test_initial_values_are_made_on_the_cpu_whatever_the_default_device():
    """PPO builds its roles under ``with torch.device(device)``; the seeded values must still come from the
    CPU generator (on an H100 the value landed on cuda and normal_ refused the CPU generator). The meta
    device stands in for the accelerator: a value made there would have no data at all."""
    import torch
    from torch import nn

    from training.torch.init import initial_value

    module = nn.Linear(4, 3)
    expected = initial_value(module, "h.0.mlp.c_fc.weight", torch.Size([3, 4]), n_layer=2, seed=7)
    with torch.device("meta"):
        made = initial_value(module, "h.0.mlp.c_fc.weight", torch.Size([3, 4]), n_layer=2, seed=7)
    assert made.device.type == "cpu"
    assert torch.equal(made, expected)

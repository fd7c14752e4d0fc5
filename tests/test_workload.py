"""The resolved workload's hash tells rounds apart by every setting, and its layout key pairs vendors."""
from run_benchmarks.catalog import casename
from run_benchmarks.results.rounds import workload
from training.contract.spec import WorkloadSpec


def _spec(**train):
    return WorkloadSpec.model_validate({
        "model": {"n_layer": 2, "n_head": 2, "d_model": 32, "vocab_size": 64, "seq_len": 16},
        "train": {"micro_batch_size": 4, "steps": 3, "warmup_steps": 1, **train},
    })


def _resolved(name, **train):
    return workload.resolved_workload(casename.parse(name), _spec(**train))


def test_any_setting_changes_the_hash_and_repeat_does_not():
    base = workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:1:2"))
    assert workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:1:2:5")) == base
    assert workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:1:2", micro_batch_size=16)) != base
    assert workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:1:2", precision="bf16")) != base
    assert workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:2:1")) != base
    assert len(base) == workload.HASH_CHARS


def test_a_setting_at_its_default_hashes_as_if_absent():
    """New settings arrive with defaults; stores must keep matching the workloads they already hold."""
    plain = workload.workload_hash(_resolved("gpt2_tiny:torch_2.13:cpu:1:2"))
    default_precision = WorkloadSpec.model_fields["train"].annotation.model_fields["precision"].default
    spelled_out = _resolved("gpt2_tiny:torch_2.13:cpu:1:2", precision=default_precision)
    assert workload.workload_hash(spelled_out) == plain
    assert "debug" not in spelled_out["spec"]  # a section wholly at its defaults is not in the hash at all


def test_layout_key_pairs_two_vendors_identical_layouts():
    a = _resolved("gpt2_tiny:torch_2.13:A100:1:2")
    b = _resolved("gpt2_tiny:torch_2.13:X1:1:2")
    assert workload.workload_hash(a) != workload.workload_hash(b)
    assert workload.layout_key(a) == workload.layout_key(b)
    assert workload.layout_key(a) != workload.layout_key(_resolved("gpt2_tiny:torch_2.13:X1:1:2", micro_batch_size=8))


def test_layout_facts_give_degrees_and_global_batch():
    spec = WorkloadSpec.model_validate({
        "model": {"n_layer": 4, "n_head": 4, "d_model": 32, "vocab_size": 64, "seq_len": 16},
        "train": {"micro_batch_size": 2, "gradient_accumulation_steps": 3, "steps": 3, "warmup_steps": 1},
        "parallel": {"tensor_parallel_degree": 2, "sharding": "stage2"},
    })
    facts = workload.layout_facts(casename.parse("gpt2_tiny:torch_2.13:cpu:2:4"), spec)
    assert (facts["world_size"], facts["data_parallel"], facts["tensor_parallel"]) == (8, 4, 2)
    assert (facts["sharding"], facts["sharding_degree"]) == ("stage2", 4)
    assert facts["global_batch_samples"] == 2 * 3 * 4 and facts["global_batch_tokens"] == 2 * 3 * 4 * 16

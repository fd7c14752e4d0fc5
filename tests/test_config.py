"""Config errors name the file, the key and the fix; layering puts each layer where it belongs."""
import pytest

from run_benchmarks.planner.inputs import load_inputs
from run_benchmarks.catalog.config import Layer, merge, parse_assignment, validate_layered
from run_benchmarks.errors import UserError
from run_benchmarks.planner.build import build_run_plan
from training.contract.spec import WorkloadSpec

from .conftest import write

CASE = "gpt2_tiny:torch:cpu:1:2"


def plan(root, tmp_path, names=(CASE,), **kwargs):
    return build_run_plan(load_inputs(root), list(names), "test-run", tmp_path / "logs", **kwargs)


def error(root, tmp_path, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        plan(root, tmp_path, **kwargs)
    return str(info.value)


def test_yaml_syntax_error_names_file_line_and_column(root, tmp_path):
    case = root / "cases/gpt2_tiny/case.yaml"
    text = case.read_text()
    bad_line = text.splitlines().index("  n_layer: 2") + 1
    case.write_text(text.replace("  n_layer: 2", "  n_layer: [2"))
    message = error(root, tmp_path)
    # The unclosed "[" is noticed where the next key starts: the line after, column 9 (1-based, as editors).
    assert message.startswith(f"{case}:{bad_line + 1}:9: YAML syntax error"), message


def test_wrong_type_names_file_and_dotted_key(root, tmp_path):
    case = root / "cases/gpt2_tiny/case.yaml"
    case.write_text(case.read_text().replace("steps: 30", "steps: thirty"))
    message = error(root, tmp_path)
    assert message.startswith(f"{case}: train.steps:")
    assert "'thirty'" in message


def test_unknown_key_suggests_the_known_one(root, tmp_path):
    case = root / "cases/gpt2_tiny/case.yaml"
    case.write_text(case.read_text().replace("warmup_steps:", "warmup_stepz:"))
    message = error(root, tmp_path)
    assert "unknown key 'train.warmup_stepz'" in message
    assert "did you mean 'train.warmup_steps'?" in message


def test_bad_value_is_blamed_on_the_layer_that_set_it(root, tmp_path):
    write(root / "configs/test_conf.yaml", "overrides:\n  train:\n    micro_batch_size: -1\n")
    message = error(root, tmp_path)
    assert "test_conf.yaml (overrides): train.micro_batch_size: Input should be greater than 0" in message
    write(root / "configs/test_conf.yaml", "overrides: {}\n")
    message = error(root, tmp_path, assignments=("train.lr=fast",))
    assert message.startswith("--set train.lr=fast: train.lr:")


def test_cross_field_rule_names_its_section(root, tmp_path):
    message = error(root, tmp_path, assignments=("train.warmup_steps=30",))
    assert "train: warmup_steps (30) must be smaller than steps (30)" in message


def test_layers_apply_case_then_extern_then_test_conf_then_command_line(root, tmp_path):
    extern = write(root / "vendors/cpu/gpt2_tiny/torch/config_mb4.yaml",
                   "train:\n  micro_batch_size: 4\n  gradient_accumulation_steps: 2\n")
    write(root / "configs/test_conf.yaml", "overrides:\n  train:\n    gradient_accumulation_steps: 3\n    lr: 2.0e-3\n")
    case = plan(root, tmp_path, extern_config="config_mb4", assignments=("train.lr=5e-3",)).cases[0]
    train = case.workload.train
    assert (train.micro_batch_size, train.gradient_accumulation_steps, train.lr, train.steps) == (4, 3, 5e-3, 30)
    assert case.provenance[("train", "micro_batch_size")] == str(extern)
    assert case.provenance[("train", "steps")] == str(root / "cases/gpt2_tiny/case.yaml")
    assert case.extern_config == extern


def test_an_extern_config_that_changes_what_the_policy_fixes_plans_and_is_marked_non_compliant(root, tmp_path):
    # once refused at load: the case's policy judges it now (catalog/compliance.py), so vendors can explore
    write(root / "vendors/cpu/gpt2_tiny/torch/config_big.yaml", "model:\n  n_layer: 48\n")
    big = plan(root, tmp_path, extern_config="config_big").cases[0]
    assert big.workload.model.n_layer == 48 and big.compliance.keys == ["model.n_layer"]
    assert big.compliance.departures[0].set_in.endswith("config_big.yaml")
    write(root / "vendors/cpu/gpt2_tiny/torch/config_short.yaml", "train:\n  steps: 3\n  warmup_steps: 1\n")
    assert plan(root, tmp_path, extern_config="config_short").cases[0].compliance.compliant  # how long: free
    write(root / "vendors/cpu/gpt2_tiny/torch/config_fast.yaml", "train:\n  lr: 1.0e-2\n")
    fast = plan(root, tmp_path, extern_config="config_fast").cases[0].compliance
    assert fast.keys == ["train.lr"] and "the case's global batch" in fast.departures[0].allowed


def test_unknown_extern_config_lists_the_available_ones(root, tmp_path):
    write(root / "vendors/cpu/gpt2_tiny/torch/config_mb4.yaml", "train:\n  micro_batch_size: 4\n")
    message = error(root, tmp_path, extern_config="config_nope")
    assert "extern config 'config_nope' not found" in message and "config_mb4" in message


def test_cluster_file_errors(root, tmp_path):
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: a}\n  - {name: a}\n")
    assert "host names must be unique; repeated: a" in error(root, tmp_path)
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: a, backend: telnet}\n")
    assert "cluster.yaml: hosts.0.backend:" in error(root, tmp_path)


def test_vendor_file_wrong_type(root, tmp_path):
    vendor = root / "vendors/cpu/vendor.yaml"
    vendor.write_text("accelerators:\n  cpu:\n    kind: cpu\n    peak_tflops: {fp32: lots}\n")
    message = error(root, tmp_path)
    assert message.startswith(f"{vendor}: accelerators.cpu.peak_tflops.fp32:")


def test_top_level_must_be_a_mapping(root, tmp_path):
    write(root / "configs/test_conf.yaml", "- just\n- a list\n")
    assert "expected a mapping of keys at the top level" in error(root, tmp_path)


def test_parse_assignment_reads_values_as_yaml():
    assert parse_assignment("train.steps=10") == {"train": {"steps": 10}}
    assert parse_assignment("train.precision=bf16") == {"train": {"precision": "bf16"}}
    with pytest.raises(UserError):
        parse_assignment("train.steps")


def test_merge_keeps_provenance_of_nested_values():
    layered = merge([Layer("a", {"train": {"steps": 1, "lr": 1.0}}), Layer("b", {"train": {"lr": 2.0}})])
    assert layered.data == {"train": {"steps": 1, "lr": 2.0}}
    assert layered.source_of(("train", "steps"), "?") == "a"
    assert layered.source_of(("train", "lr"), "?") == "b"
    with pytest.raises(UserError) as info:
        validate_layered(WorkloadSpec, layered, "default.yaml")
    assert "default.yaml: missing required key 'model'" in str(info.value)


def test_a_case_extends_another_and_keys_are_blamed_on_the_right_file(root, tmp_path):
    variant = write(root / "cases/gpt2_tiny_long/case.yaml",
                    "extends: gpt2_tiny\nmodel:\n  seq_len: 256\ntrain:\n  steps: 12\n")
    case = plan(root, tmp_path, names=("gpt2_tiny_long:torch:cpu:1:2",)).cases[0]
    assert (case.workload.model.seq_len, case.workload.model.n_layer, case.workload.train.steps) == (256, 2, 12)
    assert case.provenance[("model", "seq_len")] == str(variant)
    assert case.provenance[("model", "n_layer")] == str(root / "cases/gpt2_tiny/case.yaml")
    assert case.case_file == variant


def test_cases_that_extend_each_other_in_a_circle_are_refused(root, tmp_path):
    write(root / "cases/a/case.yaml", "extends: b\n")
    write(root / "cases/b/case.yaml", "extends: a\n")
    assert "cases extend each other in a circle: a -> b -> a" in error(root, tmp_path, names=("a:torch:cpu:1:1",))


def test_a_case_without_extends_must_be_complete(root, tmp_path):
    write(root / "cases/bare/case.yaml", "description: nothing\n")
    message = error(root, tmp_path, names=("bare:torch:cpu:1:1",))
    assert "a case needs frameworks, model, train" in message and "extends" in message


def test_task_and_data_must_agree(root, tmp_path):
    assert "task lora needs train.lora_rank" in error(root, tmp_path, assignments=(
        "task=lora", "data.source=synthetic_instruction"))
    assert "task pretrain trains on token streams" in error(root, tmp_path, assignments=(
        "data.source=synthetic_instruction",))

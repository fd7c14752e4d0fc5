"""FlagPerf's Python extern configs: read without running them (only literal assignments; anything else refused
with the file, line and why, and nothing it names runs), each key mapped, held by the case or ignored, and a
.py with a shipped GPT-3 YAML config's values plans exactly what the YAML plans."""
from __future__ import annotations

import pytest
import yaml

from run_benchmarks.catalog import flagperf_config, flagperf_keys
from run_benchmarks.errors import UserError
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs

from .conftest import ROOT, write

SHIPPED = sorted((ROOT / "vendors/nvidia").glob("gpt3_*/paddle/config_*.yaml"))
# What FlagPerf's own GPT-3 configs hold besides the tuning: none of it may change what is planned.
FLAGPERF_EXTRAS = '''# model info
model_name_or_path = "gpt3-6.7B-en"
tokenizer_name_or_path = "gpt3-6.7B-en"
continue_training = 0
split = "998,1,1"
max_seq_length = 2048
dataloader_num_workers = 1
max_steps = 100
save_steps = 10000
eval_steps = 5000000
learning_rate = 1.2e-4
min_learning_rate = 1.2e-5
warmup_steps = 188
decay_steps = 130 * 1024 * 1024
lr_scheduler_type = "cosine"
adam_beta1 = 0.9
adam_beta2 = 0.95
adam_epsilon = 1e-08
max_grad_norm = 1.0
target_loss = 1.0
target_ppl = 0.6
logging_steps = 1
log_freq = 1
seed: int = 42
per_device_eval_batch_size = 1
fuse_attention_qkv = 0
scale_loss = 1024
'''


def as_flagperf(config: dict) -> str:
    """A shipped YAML extern config's values, written as FlagPerf writes its configs (its key names)."""
    train, par = dict(config["train"]), dict(config["parallel"])
    lines = [
        f"per_device_train_batch_size = {train.pop('micro_batch_size')}",
        f"gradient_accumulation_steps = {train.pop('gradient_accumulation_steps')}",
        f"fp16 = {train['precision'] == 'fp16'}",
        f"bf16 = {train.pop('precision') == 'bf16'}",
        f"fp16_opt_level = {train.pop('amp_level')!r}",
        f"recompute = {train.pop('recompute') != 'none'}",
        'recompute_granularity = "full"',
        f"use_flash_attention = {int(train.pop('fused_attention'))}",
        f"use_fused_rms_norm = {int(train.pop('fused_norm'))}",
        f"tensor_parallel_degree = {par.pop('tensor_parallel_degree')}",
        f"pipeline_parallel_degree = {par.pop('pipeline_parallel_degree')}",
        f"sharding = {par.pop('sharding')!r}",
        f"sharding_parallel_degree = {par.pop('sharding_parallel_degree')}",
    ]
    assert not train and not par, f"keys this test does not translate yet: {train} {par}"
    return FLAGPERF_EXTRAS + "\n".join(lines) + "\n"


def planned(case_name: str, extern: str, tmp_path, root=ROOT):
    plan = build_run_plan(load_inputs(root), [case_name], "flagperf", tmp_path / "logs", extern)
    return plan.cases[0]


@pytest.mark.parametrize("config", SHIPPED, ids=[f"{p.parent.parent.name}-{p.stem}" for p in SHIPPED])
def test_a_flagperf_py_with_a_shipped_configs_values_plans_what_the_yaml_plans(config, tmp_path):
    model, memory = config.parent.parent.name, "80G" if "A10080G" in config.stem else "40G"
    case_name = f"{model}:paddle_2.5.1:{'A100' if memory == '80G' else 'A100_40G'}:1:8"
    py = write(tmp_path / f"{config.stem}.py", as_flagperf(yaml.safe_load(config.read_text())))
    from_yaml, from_py = planned(case_name, config.stem, tmp_path), planned(case_name, str(py), tmp_path)
    assert from_py.workload == from_yaml.workload
    assert from_py.rounds[0].worker_config == from_yaml.rounds[0].worker_config
    assert from_py.extern_config == py
    assert from_py.provenance[("train", "micro_batch_size")] == f"{py}:{FLAGPERF_EXTRAS.count(chr(10)) + 1} " \
                                                                 "(per_device_train_batch_size)"
    notes = "\n".join(from_py.notes)
    recompute = from_yaml.workload.train.recompute != "none"  # recompute_granularity is read only then
    assert f"read as a FlagPerf Python config, without running it: {13 if recompute else 12} key(s) mapped" in notes
    assert "max_steps = 100 (line 8): not applied: the run's train.steps is 50" in notes
    assert "max_seq_length = 2048 (line 6): agrees with the run's model.seq_len = 2048" in notes
    assert "save_steps = 10000 (line 9): accelbench saves no checkpoints" in notes


def test_a_config_name_finds_the_py_in_the_vendors_folder_and_the_yaml_wins_where_both_are(root, tmp_path):
    folder = root / "vendors/nvidia/gpt3_6.7B/paddle"
    shipped = folder / "config_TP1PP1SH2SP8A10080Gx1x8.yaml"
    py = write(folder / "config_TP1PP1SH2SP8A10080Gx1x8.py", as_flagperf(yaml.safe_load(shipped.read_text())))
    case_name = "gpt3_6.7B:paddle_2.5.1:A100:1:8"
    both = planned(case_name, "config_TP1PP1SH2SP8A10080Gx1x8.py", tmp_path, root)
    assert both.extern_config == shipped
    assert any("config_TP1PP1SH2SP8A10080Gx1x8.py is beside it and not read: the YAML wins" in n for n in both.notes)
    shipped.unlink()
    for name in ("config_TP1PP1SH2SP8A10080Gx1x8", "config_TP1PP1SH2SP8A10080Gx1x8.py"):
        assert planned(case_name, name, tmp_path, root).extern_config == py
    named_yaml = planned(case_name, "config_TP1PP1SH2SP8A10080Gx1x8.yaml", tmp_path, root)
    assert named_yaml.extern_config == py
    assert any("named a .yaml file; config_TP1PP1SH2SP8A10080Gx1x8.py is the one there" in n for n in named_yaml.notes)
    with pytest.raises(UserError) as info:
        planned(case_name, "config_nope.py", tmp_path, root)
    assert "config_TP1PP1SH2SP8A10080Gx1x8" in str(info.value) and "config_nope.yaml (nor config_nope.py)" in str(
        info.value)


def test_the_dry_run_says_which_file_it_read_and_what_it_mapped(accelbench, tmp_path):
    py = write(tmp_path / "config_mine.py", "per_device_train_batch_size = 2\nsave_steps = 5\nmax_steps = 30\n")
    done = accelbench("run", "gpt2_tiny:torch:cpu:1:2", "--extern_config_file", str(py), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"extern config: {py}\n" in done.stdout
    assert "mapped   per_device_train_batch_size = 2 (line 1) -> train.micro_batch_size = 2" in done.stdout
    assert "ignored  save_steps = 5 (line 2): accelbench saves no checkpoints" in done.stdout
    assert "case     max_steps = 30 (line 3): agrees with the run's train.steps = 30" in done.stdout


REFUSED = {
    "a call": ('x = __import__("os").system("touch {canary}")\n', "a call of \"__import__('os').system\""),
    "an import": ('import os\nos.system("touch {canary}")\n', "an import"),
    "a from-import": ('from os import system\n', "an import"),
    "a bare call": ('open("{canary}", "w")\n', "a call of 'open'"),
    "a call in a list": ('per_device_train_batch_size = [open("{canary}", "w")]\n', "a call of 'open'"),
    "a dunder target": ('__builtins__ = {{"open": 1}}\n', "'__builtins__' is a dunder name"),
    "a name": ("seed = os\n", "the name 'os' on the right side"),
    "a name in arithmetic": ("max_steps = steps * 2\n", "the name 'steps' on the right side"),
    "an attribute": ("seed = os.environ\n", "the attribute 'os.environ'"),
    "a subscript": ("seed = [1, 2][0]\n", "the subscript '[1, 2][0]'"),
    "an f-string": ('output_dir = f"{{open(\'{canary}\', \'w\')}}"\n', "an f-string"),
    "an augmented assignment": ("max_steps += 1\n", "an augmented assignment"),
    "a lambda": ("seed = lambda: 1\n", "a Lambda expression"),
    "a comprehension": ('seed = [open("{canary}", "w") for _ in "a"]\n', "a ListComp expression"),
    "a function": ('def f():\n    open("{canary}", "w")\n', "a FunctionDef statement"),
    "a class": ("class C:\n    pass\n", "a ClassDef statement"),
    "an if": ("if True:\n    seed = 1\n", "a If statement"),
    "a with": ('with open("{canary}", "w"):\n    pass\n', "a With statement"),
    "a chained assignment": ("seed = max_steps = 1\n", "a chained assignment"),
    "unpacking": ("seed, max_steps = 1, 2\n", "not a plain name"),
    "an attribute target": ("os.environ = 1\n", "not a plain name"),
    "an annotation that is code": ('seed: open("{canary}", "w") = 1\n', "the annotation"),
    "a set": ("seed = {{1}}\n", "a Set expression"),
    "string arithmetic": ('output_dir = "a" * 3\n', "arithmetic on"),
    "a bitwise operator": ("seed = 1 << 4\n", "the operator LShift"),
    "a key twice": ("fp16 = True\n", "'fp16' is assigned twice (first on line 2)"),
    "a huge power": ("max_steps = 10 ** 10 ** 10\n", "far larger than any setting"),
    "a huge product": ("max_steps = 2 ** 200 * 2 ** 200\n", "far larger than any setting"),
    "a division by zero": ("max_steps = 1 // 0\n", "a division by zero"),
    "an infinite float": ("learning_rate = 1e400\n", "not a finite number"),
    "bytes": ("output_dir = b'x'\n", "a bytes constant"),
    "a walrus": ("seed = (x := 1)\n", "a NamedExpr expression"),
}


@pytest.mark.parametrize("what", REFUSED)
def test_anything_but_literal_assignments_is_refused_with_line_and_why_and_nothing_runs(what, accelbench, tmp_path):
    canary = tmp_path / "CANARY"
    text, why = REFUSED[what]
    config = write(tmp_path / "config_evil.py", "# a FlagPerf config\nfp16 = False\n" + text.format(canary=canary))
    done = accelbench("run", "gpt2_tiny:torch:cpu:1:2", "--extern_config_file", str(config), "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{config}:3: refused: " in done.stderr and why in done.stderr, done.stderr
    assert "fix: write the value out as a literal" in done.stderr
    assert "Traceback" not in done.stderr and not canary.exists()
    assert not done.run_dirs()


def test_syntax_errors_deep_nesting_nul_bytes_and_the_size_cap(tmp_path, monkeypatch):
    def refused(text: str) -> str:
        with pytest.raises(UserError) as info:
            flagperf_config.parse_assignments(text, "c.py")
        return str(info.value)

    assert refused("seed = (1\n").startswith("c.py:1: Python syntax error")
    assert "nested more than 32 levels" in refused("seed = " + "[" * 40 + "]" * 40 + "\n")
    assert refused("seed = " + "-" * 100_000 + "1\n").startswith("c.py")  # the parser's limit, or ours
    assert "not a FlagPerf config" in refused("seed = 1\0\n") or "syntax error" in refused("seed = 1\0\n")
    monkeypatch.setenv("ACCELBENCH_MAX_CONFIG_BYTES", "64")
    big = write(tmp_path / "config_big.py", "seed = 1\n" * 20)
    with pytest.raises(UserError) as info:
        flagperf_config.read(big)
    assert "over the cap of 64 bytes" in str(info.value) and "ACCELBENCH_MAX_CONFIG_BYTES" in str(info.value)


def test_literals_and_arithmetic_are_read_as_python_reads_them():
    text = ('"""docstring"""\nseed: int = 42\ndecay_steps = 130 * 1024 * 1024\nlearning_rate = -1.2e-4 / 2\n'
            'x = (2 ** 10) % 1000 // 3\nlists = [1, (2, "a"), {"k": None}]\nflag = True\n')
    read = {k: (v.value, v.line) for k, v in flagperf_config.parse_assignments(text, "c.py").items()}
    assert read == {"seed": (42, 2), "decay_steps": (130 * 1024 * 1024, 3), "learning_rate": (-1.2e-4 / 2, 4),
                    "x": ((2 ** 10) % 1000 // 3, 5), "lists": ([1, (2, "a"), {"k": None}], 6), "flag": (True, 7)}


def mapping(text: str) -> dict:
    settings = flagperf_keys.translate(flagperf_config.parse_assignments(text, "c.py"), "c.py")
    return {k: v for s in settings for k, v in s.targets.items()}


def test_each_mapped_key_becomes_its_workload_key():
    assert mapping("tensor_parallel_degree = -1\npipeline_parallel_degree = -1\nsharding_parallel_degree = -1\n"
                   "sharding = ''\n") == {"parallel.tensor_parallel_degree": 1, "parallel.pipeline_parallel_degree": 1,
                                          "parallel.sharding": "none"}
    assert mapping("sharding = 'stage3 offload'\nsharding_degree = 4\nsequence_parallel = 1\n") == {
        "parallel.sharding": "stage3", "parallel.offload": True, "parallel.sharding_parallel_degree": 4,
        "parallel.sequence_parallel": True}
    assert mapping("bf16 = True\nfp16 = False\nfp16_opt_level = 'O1'\nrecompute = 1\n") == {
        "train.precision": "bf16", "train.amp_level": "O1", "train.recompute": "full"}
    assert mapping("fp16 = False\n") == {"train.precision": "fp32"}
    assert mapping("virtual_pp_degree = 2\n") == {"parallel.virtual_pipeline_degree": 2,
                                                   "parallel.pipeline_schedule": "interleaved"}
    assert mapping("virtual_pp_degree = 1\nrecompute = False\nrecompute_granularity = 'core_attn'\n") == {
        "train.recompute": "none"}


@pytest.mark.parametrize("text, message", [
    ("per_device_train_batch_sise = 4\n", "unknown FlagPerf key 'per_device_train_batch_sise'\n  fix: did you mean "
                                          "'per_device_train_batch_size'?"),
    ("fp16 = True\nbf16 = True\n", "fp16 (line 1) and bf16 (line 2) are both on; choose one"),
    ("recompute = True\nrecompute_granularity = 'core_attn'\n", "accelbench recomputes whole blocks only"),
    ("sharding = 'stage2 stage3'\n", "expected one of 'stage1', 'stage2', 'stage3'"),
    ("fp16_opt_level = 'O0'\n", "is no mixed precision at all"),
    ("use_flash_attention = 'yes'\n", "expected True/False (or 1/0)"),
    ("sharding_degree = 4\nsharding_parallel_degree = 8\n", "sharding_parallel_degree sets "
                                                            "parallel.sharding_parallel_degree to 8, but sharding_degree"),
])
def test_unknown_keys_bad_values_and_two_keys_that_disagree_are_refused(text, message):
    with pytest.raises(UserError) as info:
        mapping(text)
    assert message in str(info.value)


def test_a_bad_value_is_blamed_on_the_line_that_set_it(tmp_path):
    py = write(tmp_path / "config_bad.py", "save_steps = 1\nper_device_train_batch_size = 0\n")
    with pytest.raises(UserError) as info:
        planned("gpt2_tiny:torch:cpu:1:2", str(py), tmp_path)
    assert f"{py}:2 (per_device_train_batch_size): train.micro_batch_size: Input should be greater than 0" in str(
        info.value)


def test_every_known_key_is_in_the_onboarding_table():
    table = (ROOT / "docs/vendor-onboarding.md").read_text()
    missing = [key for key in flagperf_keys.KNOWN if f"`{key}`" not in table]
    assert not missing, f"docs/vendor-onboarding.md, 'FlagPerf configs', lacks: {missing}"


def test_a_real_run_says_first_which_extern_file_it_reads(tmp_path):
    """What a run (not a dry run) prints on stderr before it starts: the file, and the notes that are not per key."""
    import io

    from rich.console import Console

    from run_benchmarks.cli.run_view import print_extern_configs

    py = write(tmp_path / "config_mine.py", "per_device_train_batch_size = 2\nsave_steps = 5\n")
    plan = build_run_plan(load_inputs(ROOT), ["gpt2_tiny:torch:cpu:1:2"], "flagperf", tmp_path / "logs", str(py))
    out = io.StringIO()
    print_extern_configs(Console(file=out, width=200), plan)
    assert out.getvalue().splitlines() == [
        f"gpt2_tiny:torch:cpu:1:2: extern config {py}",
        "  read as a FlagPerf Python config, without running it: 1 key(s) mapped, 0 the case's (not applied), "
        "1 ignored (docs/vendor-onboarding.md, 'FlagPerf configs')"]

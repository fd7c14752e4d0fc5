"""Every case's policy (cases/policy.yaml, a case's own policy.yaml) and the plan's verdict against it: what is
fixed, what may change within its bounds, where each rule comes from; ``--strict``; the shipped extern configs;
sweeps. All in this process: plans and dry runs, nothing starts."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from run_benchmarks.catalog import compliance, policy
from run_benchmarks.errors import UserError
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs
from training.contract.spec import WorkloadSpec

from .conftest import ROOT, write

TINY = "gpt2_tiny:torch:cpu:1:2"
LAYOUT = re.compile(r"x(\d+)x(\d+)$")  # an extern config's name ends in <accelerator>x<nnodes>x<nprocs>


def verdict(root: Path, name: str = TINY, sets: tuple[str, ...] = (), extern: str | None = None):
    plan = build_run_plan(load_inputs(root), [name], "policy", root / "logs-unused", extern, sets)
    return plan.cases[0].compliance


def test_a_plain_run_is_compliant_and_its_dry_run_says_so(accelbench):
    assert verdict(ROOT).compliant and verdict(ROOT).policy == ["cases/policy.yaml"]
    dry = accelbench("run", TINY, "--dry-run")
    assert dry.returncode == 0 and "policy: compliant (cases/policy.yaml)" in dry.stdout


def test_a_deeper_model_departs_names_the_key_and_strict_refuses_it(accelbench):
    found = verdict(ROOT, sets=("model.n_layer=3",))
    assert not found.compliant and found.keys == ["model.n_layer"]
    (departure,) = found.departures
    assert (departure.value, departure.case_value, departure.set_in) == (3, 2, "--set model.n_layer=3")
    assert departure.rule.startswith("fixed: the model's shape") and departure.source == "FlagPerf's rule"
    dry = accelbench("run", TINY, "--set", "model.n_layer=3", "--dry-run")
    assert dry.returncode == 0, dry.stderr  # a departing run still runs (vendors explore), marked
    assert "policy: NON-COMPLIANT" in dry.stdout and "departs: model.n_layer 3 (the case's 2" in dry.stdout
    strict = accelbench("run", TINY, "--set", "model.n_layer=3", "--strict", "--dry-run")
    assert strict.returncode == 2 and "--strict" in strict.stderr and "model.n_layer 3" in strict.stderr
    assert "Traceback" not in strict.stderr
    assert accelbench("run", TINY, "--strict", "--dry-run").returncode == 0


@pytest.mark.parametrize("sets", [
    ("parallel.sharding=stage2", "train.micro_batch_size=16", "train.gradient_accumulation_steps=4"),
    ("parallel.sharding=stage1", "train.recompute=full", "train.precision=bf16", "train.compile=default"),
    ("train.steps=8", "train.warmup_steps=2", "train.seed=7", "data.seed=3", "debug.memory_limit_mib=512"),
    # the global batch x8 (16 x 4 accumulation over 2 ranks vs 8 x 1): lr may follow it up to the linear rule
    ("train.micro_batch_size=16", "train.gradient_accumulation_steps=4", "train.lr=2.4e-3"),
    ("train.micro_batch_size=16", "train.gradient_accumulation_steps=4", "train.lr=8.485e-4"),  # square-root rule
])
def test_layout_batch_precision_kernels_and_lr_within_bounds_are_compliant(sets):
    found = verdict(ROOT, sets=sets)
    assert found.compliant, found.summary()


def test_what_departs_is_named_with_what_the_rule_allows():
    lr = verdict(ROOT, sets=("train.micro_batch_size=16", "train.lr=2e-3")).departures  # batch x2: lr up to 6e-4
    assert [d.key for d in lr] == ["train.lr"] and "between 0.0003 and 0.0006" in lr[0].allowed
    assert lr[0].source == "MLPerf Training rules"
    found = verdict(ROOT, sets=("train.weight_decay=0", "data.synthetic=uniform", "debug.grad_noise=0.5"))
    assert found.keys == ["data.synthetic", "debug.grad_noise", "train.weight_decay"]
    assert all(d.sentence().startswith(d.key) for d in found.departures)


def test_precision_outside_the_allowed_set_departs(root):
    case = policy.load(root / "cases", "gpt2_tiny")
    base = WorkloadSpec.model_validate({"model": {"n_layer": 2, "n_head": 2, "d_model": 8, "vocab_size": 16,
                                                  "seq_len": 8}, "train": {"micro_batch_size": 1, "steps": 2,
                                                                           "warmup_steps": 1}})
    fp8 = base.model_copy(update={"train": base.train.model_copy(update={"precision": "fp8"})})
    (departure,) = compliance.judge(case, base, fp8, 1).departures
    assert departure.key == "train.precision" and departure.allowed == "fp32, bf16, fp16"


def test_a_cases_own_policy_adds_its_published_benchmarks_rule():
    gpt3 = policy.load(ROOT / "cases", "gpt3_6.7B")
    assert gpt3.paths[0].endswith("cases/gpt3_6.7B/policy.yaml")
    source = gpt3.rule_for("data.source")
    assert source.rule.allowed == ["synthetic", "tokens"] and source.source.title.startswith("the published")
    assert policy.load(ROOT / "cases", "gpt2_tiny").rule_for("data.source").rule.rule == "fixed"
    assert gpt3.rule_for("model.n_layer").file.endswith("cases/policy.yaml")  # the rest is the default's


def test_every_key_of_the_workload_schema_is_named_by_a_rule():
    """A new workload key must be decided (fixed or free, and why) in cases/policy.yaml, not fall to the
    unnamed default."""
    def keys(model: type[BaseModel], prefix: str = "") -> list[str]:
        out = []
        for name, field in model.model_fields.items():
            sub = next((a for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
                        if isinstance(a, type) and issubclass(a, BaseModel)), None)
            out += keys(sub, f"{prefix}{name}.") if sub is not None else [f"{prefix}{name}"]
        return out
    default = policy.load(ROOT / "cases", "gpt2_tiny")
    unnamed = [k for k in keys(WorkloadSpec) if default.rule_for(k) is policy.UNNAMED]
    assert unnamed == [], unnamed


def test_the_shipped_gpt3_configs_are_compliant_and_one_that_changes_the_optimizer_is_not(root, accelbench):
    configs = sorted((ROOT / "vendors/nvidia").glob("gpt3_*/paddle/config_*.yaml"))
    assert len(configs) == 16
    for config in configs:
        nnodes, nprocs = LAYOUT.search(config.stem).groups()
        hardware = "A100_40G" if "A10040G" in config.stem else "A100"
        found = verdict(ROOT, f"{config.parent.parent.name}:paddle:{hardware}:{nnodes}:{nprocs}", extern=config.stem)
        assert found.compliant, (config, found.summary())
    shipped = root / "vendors/nvidia/gpt3_6.7B/paddle/config_TP1PP1SH2SP8A10080Gx1x8.yaml"
    changed = shipped.with_name("config_TP1PP1SH2SP8WDA10080Gx1x8.yaml")
    changed.write_text(shipped.read_text().replace("train:\n", "train:\n  weight_decay: 0.0\n", 1))
    found = verdict(root, "gpt3_6.7B:paddle:A100:1:8", extern=changed.stem)
    assert found.keys == ["train.weight_decay"] and "the optimizer" in found.departures[0].rule
    assert found.departures[0].set_in.endswith(changed.name)
    checked = accelbench("vendor", "check", "nvidia", "--root", str(root))
    assert checked.returncode == 1 and changed.name in checked.stdout
    assert "departs from its case's policy: train.weight_decay 0 (the case's 0.1" in checked.stdout
    assert checked.stdout.count("departs from its case's policy") == 1  # the 16 shipped ones pass


@pytest.mark.parametrize("sweep", ["configs/sweeps/gpt2_tiny_layouts.yaml", "configs/sweeps/finetune_table_tiny.yaml"])
def test_batch_sweeps_and_the_finetune_table_stay_compliant(accelbench, sweep):
    dry = accelbench("sweep", str(ROOT / sweep), "--dry-run", "--strict")
    assert dry.returncode == 0, dry.stderr
    assert "runs" in dry.stdout and "non-compliant" not in dry.stdout


def test_the_max_batch_search_stays_compliant_and_a_departing_point_is_marked(accelbench):
    dry = accelbench("sweep", TINY, "--max-batch", "--dry-run", "--strict")
    assert dry.returncode == 0 and "non-compliant" not in dry.stdout, dry.stderr
    marked = accelbench("sweep", TINY, "--grid", "model.n_layer=2,3", "--dry-run")
    assert "runs (non-compliant: model.n_layer)" in marked.stdout and marked.stdout.count("non-compliant") == 1
    refused = accelbench("sweep", TINY, "--grid", "model.n_layer=2,3", "--dry-run", "--strict")
    assert refused.returncode == 2 and "model.n_layer 3" in refused.stderr


def test_a_policy_file_with_an_unknown_source_or_a_bad_rule_is_refused_naming_it(root, accelbench):
    own = write(root / "cases/gpt2_tiny/policy.yaml", "rules:\n  - {keys: [model.n_layer], rule: free, why: x, "
                                                      "source: nowhere}\n")
    with pytest.raises(UserError) as caught:
        verdict(root)
    assert str(own) in caught.value.message and "'nowhere' names no source" in caught.value.message
    listed = accelbench("list", "--check", "--root", str(root))  # list --check validates policies with their cases
    assert listed.returncode == 2 and "'nowhere' names no source" in listed.stderr
    write(own, "rules:\n  - {keys: [model.n_layer], rule: one_of, why: x, source: flagperf}\n")
    with pytest.raises(UserError) as caught:
        verdict(root)
    assert "allowed lists the values of a one_of rule" in str(caught.value)
    write(own, "rules:\n  - {keys: [model.n_layer], rule: free, why: depth is explored, source: flagperf}\n")
    assert verdict(root, sets=("model.n_layer=3",)).compliant  # the case's own rule wins on its key


def test_a_tree_without_a_policy_is_not_judged_and_strict_refuses_it(root, accelbench):
    (root / "cases/policy.yaml").unlink()
    assert verdict(root) is None
    dry = accelbench("run", TINY, "--dry-run", "--root", str(root))
    assert "policy: not judged" in dry.stdout
    strict = accelbench("run", TINY, "--dry-run", "--strict", "--root", str(root))
    assert strict.returncode == 2 and "no policy to judge it by" in strict.stderr

"""Every case's model: it builds, its size is what the family publishes, its FLOPs are counted right."""

import pytest
import torch
import yaml

from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.config import Layer, merge
from training.contract import flops
from training.contract.spec import ModelSpec, WorkloadSpec
from training.torch.model import GPT, alibi_causal_mask, alibi_slopes

from .conftest import ROOT

# task micro cases (gemm, allreduce, ...) measure the device and have no model
CASES = sorted(p.parent.name for p in (ROOT / "cases").glob("*/case.yaml")
               if (yaml.safe_load(p.read_text()) or {}).get("task") != "micro")
TINY = [c for c in CASES if c.endswith("_tiny")]

# Parameter counts published with the models (ColossalAI's model zoo `numel`, Hugging Face checkpoints),
# asserted exactly. OPT's released checkpoints hold 2 extra learned positions (its position offset of 2):
# 2 x d_model parameters the model here leaves out, written out in PUBLISHED_OFFSET.
PUBLISHED = {
    "gpt2_s": 124_439_808,
    "gpt2_xl": 1_557_611_200,
    "gpt2_10b": 10_279_047_168,
    "llama_7b": 6_738_415_616,
    "llama3.1_8b": 8_030_261_248,
    "bloom_7b1": 7_069_016_064,
    "opt_1.3b": 1_315_758_080,
}
PUBLISHED_OFFSET = {"opt_1.3b": 2 * 2048}  # OPT: 2 extra positions x d_model


def spec_of(case: str) -> ModelSpec:
    """The case's model as a run would see it (``extends`` followed, every key validated)."""
    resolved = CaseCatalog(ROOT / "cases", ROOT / "vendors").resolve(case)
    layered = merge([Layer(source, layer) for source, layer in resolved.layers()])
    return WorkloadSpec.model_validate(layered.data).model


def test_every_family_has_a_tiny_case():
    families = {spec_of(c).family for c in CASES}
    assert families == {spec_of(c).family for c in TINY} == {"gpt2", "gpt3", "llama", "opt", "bloom"}


@pytest.mark.parametrize("case", CASES)
def test_case_model_builds_and_matches_the_analytic_size(case):
    spec = spec_of(case)
    with torch.device("meta"):  # shapes only: a 175B model costs no memory here
        model = GPT(spec)
    real = sum(p.numel() for p in model.parameters())
    assert real == flops.total_params(spec)
    if case in PUBLISHED:
        assert real + PUBLISHED_OFFSET.get(case, 0) == PUBLISHED[case]


@pytest.mark.parametrize("case", TINY)
def test_tiny_family_flops_match_the_flop_counter(case):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    spec = spec_of(case)
    torch.manual_seed(0)
    model = GPT(spec)
    tokens = torch.randint(0, spec.vocab_size, (2, spec.seq_len + 1))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(tokens[:, :-1], tokens[:, 1:]).backward()
    # Exact: the formula counts every matmul the model runs (measured difference 0 on every tiny case).
    assert flops.training_flops_per_token(spec) * 2 * spec.seq_len == counter.get_total_flops()


def test_alibi_slopes_and_mask():
    assert alibi_slopes(8).tolist() == [2.0 ** -(i + 1) for i in range(8)]
    # Not a power of two (BLOOM's 12, 32, 112 heads...): the 8 slopes of the nearest lower power of two, then
    # every other slope of the next power (16: 2^-0.5, 2^-1.5, ...), as in the ALiBi paper and BLOOM.
    expected = [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(i + 0.5) for i in range(4)]
    assert alibi_slopes(12).tolist() == pytest.approx(expected, rel=1e-7)  # float32 rounding
    mask = alibi_causal_mask(torch.tensor([0.5]), 3, torch.float32)[0, 0]
    assert mask[0, 1] == float("-inf") and mask[1, 2] == float("-inf")  # no looking ahead
    assert mask[2].tolist()[:3] == [-1.0, -0.5, 0.0]  # farther keys are penalised more


def test_gqa_with_as_many_kv_heads_as_heads_is_plain_attention():
    base = dict(n_layer=1, n_head=4, d_model=64, vocab_size=128, seq_len=16)
    torch.manual_seed(0)
    mha = GPT(ModelSpec(**base))
    torch.manual_seed(0)
    gqa = GPT(ModelSpec(**base, n_kv_head=4))
    tokens = torch.randint(0, 128, (2, 16))
    assert torch.equal(mha(tokens), gqa(tokens))

"""The stated FLOP formula against torch's own count on the real model.

CPU's fused attention kernel has no entry in ``torch.utils.flop_counter``, so
the count runs attention through the MATH backend, which it decomposes into
counted matmuls; the model and its FLOPs are the same either way.
"""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from training.contract import flops
from training.contract.spec import ModelSpec
from training.torch.model import GPT

TINY = dict(n_layer=2, n_head=4, d_model=128, vocab_size=1024, seq_len=128)


@pytest.mark.parametrize("overrides", [
    {},                                                             # gpt2_tiny
    {"activation": "swiglu", "norm": "rmsnorm", "position": "rotary", "bias": False,
     "tie_embeddings": False, "d_ff": 344},                         # llama-shaped
    {"n_layer": 4, "n_head": 8, "d_model": 256, "seq_len": 256, "activation": "relu"},
])
def test_formula_matches_flop_counter_exactly(overrides):
    spec = ModelSpec(**{**TINY, **overrides})
    torch.manual_seed(0)
    model = GPT(spec)
    batch = 2
    tokens = torch.randint(0, spec.vocab_size, (batch, spec.seq_len + 1))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
    # Exact (measured difference 0 on all three shapes): 6N + 12·L·H·Q·T counts every matmul run.
    assert flops.training_flops_per_token(spec) * batch * spec.seq_len == counter.get_total_flops()


def test_gpt2_small_shape_by_hand():
    spec = ModelSpec(n_layer=12, n_head=12, d_model=768, vocab_size=50257, seq_len=1024)
    n_matmul = 12 * (4 * 768**2 + 2 * 768 * 3072) + 768 * 50257
    assert flops.matmul_params(spec) == n_matmul
    assert flops.training_flops_per_token(spec) == 6 * n_matmul + 12 * 12 * 12 * 64 * 1024

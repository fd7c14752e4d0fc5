"""LoRA: only the adapters train, the base model is untouched, and its FLOP formula is exact."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from training.contract import flops
from training.contract.spec import ModelSpec, TrainSpec
from training.torch.lora import LoRALinear, apply_lora, trainable_parameters
from training.torch.model import GPT

LLAMA = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=128, d_ff=344, vocab_size=512, seq_len=64,
             norm="rmsnorm", activation="swiglu", position="rotary", bias=False, tie_embeddings=False)


def lora_train(**overrides) -> TrainSpec:
    return TrainSpec(micro_batch_size=2, steps=2, warmup_steps=1, lora_rank=4, **overrides)


def test_only_adapters_train_and_the_base_model_stays_bit_identical():
    spec, train = ModelSpec(**LLAMA), lora_train(lora_targets=("q", "v", "gate"))
    torch.manual_seed(0)
    model = GPT(spec)
    tokens = torch.randint(0, spec.vocab_size, (2, spec.seq_len + 1))
    before_logits = model(tokens[:, :-1])
    adapters = apply_lora(model, train)
    assert torch.equal(model(tokens[:, :-1]), before_logits)  # B = 0: step 0 is the base model
    frozen = {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" not in name}
    trainable = trainable_parameters(model)
    # rank 4 on q (128->128), v (128->64, GQA) and gate (128->344) of both blocks
    assert sum(p.numel() for p in trainable) == adapters == 2 * 4 * ((128 + 128) + (128 + 64) + (128 + 344))
    assert sum(isinstance(m, LoRALinear) for m in model.modules()) == 6
    assert all("lora_" in name for name, p in model.named_parameters() if p.requires_grad)
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    start = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    for _ in range(3):
        model(tokens[:, :-1], tokens[:, 1:]).backward()
        optimizer.step()
        optimizer.zero_grad()
    for name, p in model.named_parameters():
        if name in frozen:
            assert torch.equal(p, frozen[name]), f"{name} changed"
            assert p.grad is None
        else:
            assert not torch.equal(p, start[name]), f"adapter {name} did not train"


@pytest.mark.parametrize("targets", [("q", "v"), ("q", "k", "v", "o", "fc", "gate", "down"), ("v",), ("fc",),
                                     ("o",), ("k", "down")])
def test_lora_flop_formula_equals_the_flop_counter(targets):
    spec, train = ModelSpec(**LLAMA), lora_train(lora_targets=targets)
    model = GPT(spec)
    apply_lora(model, train)
    tokens = torch.randint(0, spec.vocab_size, (2, spec.seq_len + 1))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(tokens[:, :-1], tokens[:, 1:]).backward()
    counted_per_token = counter.get_total_flops() / (2 * spec.seq_len)
    assert flops.lora_training_flops_per_token(spec, train) == counted_per_token
    assert flops.flops_per_token(spec, train) == (counted_per_token, flops.LORA_FORMULA)
    assert counted_per_token < flops.training_flops_per_token(spec)  # frozen weights cost less than training them

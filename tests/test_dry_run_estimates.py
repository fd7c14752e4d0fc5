"""The dry run's estimates (planner/estimates.py): the round's time against its deadline, from a reference or a
stated assumption; training state that cannot fit the device, with the vendor's shipped configs named; an
extern config written for another device's memory."""
from __future__ import annotations

from training.contract import flops
from training.contract.spec import ModelSpec

from .conftest import write

STEP_TOKENS = 4 * 32 * 8 * 2048  # the published A100 config: micro batch 4 x 32 accumulation x 8 ranks x 2048


def _dry(accelbench, root, *args):
    done = accelbench("run", *args, "--dry-run", "--root", str(root))
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def test_the_round_time_from_a_reference_passes_the_deadline_and_says_so(accelbench, root):
    write(root / "cases/gpt3_6.7B/references.yaml", "references:\n  - hardware: A100\n    figures:\n"
          "      tokens_per_s_per_device: {value: 3200}\n")
    out = _dry(accelbench, root, "gpt3_6.7B:paddle:A100:1:8", "--extern-config", "config_TP1PP1SH2SP8A10080Gx1x8")
    minutes = 50 * STEP_TOKENS / (3200 * 8) / 60  # 68.3 min, the example
    assert (f"round time ≈ 50 steps x {STEP_TOKENS:,} tokens / (3,200 tokens/s/device x 8) = {minutes:.1f} min"
            in out)
    assert f"tokens/s from the reference in {root / 'cases/gpt3_6.7B/references.yaml'}" in out
    assert f"warning the round's estimated {minutes:.1f} min pass its deadline of 60.0 min (timeout_s 3600)" in out


def test_without_a_reference_the_assumption_is_stated(accelbench, root):
    out = _dry(accelbench, root, "gpt3_6.7B:paddle:A100:1:8", "--extern-config", "config_TP1PP1SH2SP8A10080Gx1x8")
    assert "tokens/s from an assumed 40% MFU of A100's 312 TFLOP/s datasheet peak" in out
    assert "training state per device ≥ 25.0 GB" in out and "sharding stage2 over 8" in out


def test_plain_ddp_of_6_7b_cannot_fit_and_the_shipped_configs_are_named(accelbench, root):
    out = _dry(accelbench, root, "gpt3_6.7B:torch:H100:1:8")
    params = flops.total_params(ModelSpec(family="gpt3", n_layer=32, n_head=32, d_model=4096, vocab_size=50304,
                                          seq_len=2048))  # cases/gpt3_6.7B/case.yaml
    assert f"weights, gradients and Adam states alone take {params * 16 / 1e9:.1f} GB per device" in out
    assert round(params * 16 / 1e9) in (106, 107)  # the "≈ 107 GB"
    assert "the plan cannot fit H100's 80 GiB" in out
    assert "nvidia ships 8 config(s) for gpt3_6.7B" in out and "paddle/config_TP1PP1SH2SP8A10040Gx1x8.yaml" in out


def test_a_40g_config_on_an_80g_accelerator_is_named(accelbench, root):
    out = _dry(accelbench, root, "gpt3_6.7B:paddle:H100:1:8", "--extern-config", "config_TP1PP1SH2SP8A10040Gx1x8")
    assert ("warning extern config config_TP1PP1SH2SP8A10040Gx1x8.yaml was written for A100_40G (40 GiB); this plan "
            "runs it on H100 (80 GiB)") in out
    same = _dry(accelbench, root, "gpt3_6.7B:paddle:A100:1:8", "--extern-config", "config_TP1PP1SH2SP8A10080Gx1x8")
    assert "was written for" not in same

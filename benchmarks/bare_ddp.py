#!/usr/bin/env python3
"""A bare torch DDP training loop with no accelbench code in it: the yardstick for the whole `accelbench run`.

What a user would write by hand to train ``gpt2_tiny``'s GPT-2 shape with DistributedDataParallel: torch only
(no ``training`` or ``run_benchmarks`` import), the same architecture as training/torch/model.py for the
``gpt2`` family (learned positions, LayerNorm with bias, tanh GELU, tied embeddings, causal SDPA), AdamW with
the case's lr and weight decay, random tokens. Launched by torchrun, as accelbench launches its workers:

    torchrun --nproc-per-node 2 benchmarks/bare_ddp.py --steps 40 --warmup-steps 5

Each rank times its steps after the warm-up (perf_counter around the loop); rank 0 prints one JSON line,
``{"tokens_per_s_total": ..., "step_time_median_s": ...}``: every rank's tokens over the slowest rank's time,
what accelbench's ``tokens_per_s_total`` means. benchmarks/run_vs_bare_ddp.py runs it beside `accelbench run`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.attn_proj = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.ln_1(x)
        q, k, v = (p(h).view(b, t, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, layers: int, heads: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for module in self.modules():  # GPT-2's initialisation
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default in (("--n-layer", 4), ("--n-head", 4), ("--d-model", 256), ("--vocab-size", 1024),
                          ("--seq-len", 256), ("--micro-batch-size", 8), ("--steps", 40), ("--warmup-steps", 5),
                          ("--seed", 1234)):
        parser.add_argument(flag, type=int, default=default)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    args = parser.parse_args()
    if args.steps <= args.warmup_steps:
        parser.error("--steps must be more than --warmup-steps")
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    model = GPT(args.vocab_size, args.seq_len, args.d_model, args.n_layer, args.n_head)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    rank = dist.get_rank() if world > 1 else 0
    generator = torch.Generator().manual_seed(args.seed + rank)
    step_times = []
    for step in range(args.steps):
        if step == args.warmup_steps:
            started = time.perf_counter()
        before = time.perf_counter()
        tokens = torch.randint(0, args.vocab_size, (args.micro_batch_size, args.seq_len + 1), generator=generator)
        loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step_times.append(time.perf_counter() - before)
    elapsed = torch.tensor([time.perf_counter() - started])
    if world > 1:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    measured = args.steps - args.warmup_steps
    if rank == 0:
        print(json.dumps({"tokens_per_s_total": world * measured * args.micro_batch_size * args.seq_len
                          / float(elapsed), "step_time_median_s": statistics.median(step_times[args.warmup_steps:]),
                          "loss": loss.item()}), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

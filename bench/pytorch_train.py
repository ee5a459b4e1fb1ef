#!/usr/bin/python3
"""PyTorch side of the end-to-end training benchmark (bench/README.md).

Builds the same three models as bench/bench_configs.h in plain PyTorch (fp32, CPU, the
Debian python3-torch 1.13: no fused SDPA, so attention is the usual masked softmax),
trains with torch.optim.AdamW on random tokens and prints one JSON line per configuration
with the same fields as bench/train_throughput: step time, tokens/s, model TFLOP/s by
Megatron's formula, MFU against --peak-gflops, and the process's peak RSS.

  /usr/bin/python3 bench/pytorch_train.py --threads 2 [--config NAME] [--steps N] [--warmup N] [--peak-gflops G]
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(layers=4, hidden=256, heads=4, groups=4, ffn=1024, seq=256, mbs=8, vocab=50304, llama=False),
    "llama-small": dict(layers=8, hidden=512, heads=8, groups=8, ffn=1408, seq=512, mbs=4, vocab=32000, llama=True),
    "gpt2-124m": dict(layers=12, hidden=768, heads=12, groups=12, ffn=3072, seq=1024, mbs=4, vocab=50304,
                      llama=False),
}


def megatron_flops(c, batch):
    """megatron/training/training.py num_floating_point_operations (dense, core_v0.12)."""
    h, s, L, n, g, f, v = c["hidden"], c["seq"], c["layers"], c["heads"], c["groups"], c["ffn"], c["vocab"]
    gamma = 1.5 if c["llama"] else 1.0
    return 12 * batch * s * L * h * h * ((1 + g / n + s / (2 * h)) + (f / h) * gamma + v / (2 * L * h))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads, self.llama = c["hidden"], c["heads"], c["llama"]
        norm = (lambda: RMSNorm(h)) if self.llama else (lambda: nn.LayerNorm(h))
        self.ln1, self.ln2 = norm(), norm()
        self.qkv = nn.Linear(h, 3 * h, bias=not self.llama)
        self.proj = nn.Linear(h, h, bias=not self.llama)
        if self.llama:
            self.fc1 = nn.Linear(h, 2 * c["ffn"], bias=False)
        else:
            self.fc1 = nn.Linear(h, c["ffn"])
        self.fc2 = nn.Linear(c["ffn"], h, bias=not self.llama)
        self.register_buffer("mask", torch.triu(torch.ones(c["seq"], c["seq"], dtype=torch.bool), 1), persistent=False)

    def attention(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.llama:
            def rope(t):
                d = t.shape[-1]
                t1, t2 = t[..., : d // 2], t[..., d // 2:]
                return t * cos + torch.cat([-t2, t1], -1) * sin
            q, k = rope(q), rope(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cos, sin):
        x = x + self.attention(self.ln1(x), cos, sin)
        y = self.ln2(x)
        if self.llama:
            gate, up = self.fc1(y).chunk(2, dim=-1)
            return x + self.fc2(F.silu(gate) * up)
        return x + self.fc2(F.gelu(self.fc1(y), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.wte = nn.Embedding(c["vocab"], c["hidden"])
        if not c["llama"]:
            self.wpe = nn.Embedding(c["seq"], c["hidden"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.ln_f = RMSNorm(c["hidden"]) if c["llama"] else nn.LayerNorm(c["hidden"])
        self.head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        if not c["llama"]:
            self.head.weight = self.wte.weight  # tied, as GPT-2
        d = c["hidden"] // c["heads"]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(c["seq"]).float(), inv)
        emb = torch.cat([freqs, freqs], -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, idx, targets):
        x = self.wte(idx)
        if not self.c["llama"]:
            x = x + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--config", default="")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--peak-gflops", type=float, default=0.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for name, c in CONFIGS.items():
        if a.config and name != a.config:
            continue
        model = GPT(c)
        with torch.no_grad():  # Megatron's initialisation: N(0, 0.02) weights, zero biases
            for n, prm in model.named_parameters():
                if prm.dim() >= 2:
                    prm.normal_(0.0, 0.02)
                elif n.endswith("bias"):
                    prm.zero_()
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        other = [p for n, p in model.named_parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
                                lr=1e-4)
        idx = torch.randint(0, c["vocab"], (c["mbs"], c["seq"]))
        tgt = torch.randint(0, c["vocab"], (c["mbs"], c["seq"]))

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(idx, tgt)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return float(loss)

        for _ in range(a.warmup):
            step()
        t = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        sec = (time.perf_counter() - t) / a.steps
        flops = megatron_flops(c, c["mbs"])
        print(json.dumps({
            "impl": "pytorch", "config": name, "params": sum(p.numel() for p in model.parameters()),
            "step_s": round(sec, 4), "tokens_per_s": round(c["mbs"] * c["seq"] / sec, 1),
            "tflops": round(flops / sec / 1e12, 4),
            "mfu": round(flops / sec / 1e9 / a.peak_gflops, 4) if a.peak_gflops else 0.0,
            "loss": round(loss, 4), "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }), flush=True)
        del model, opt


if __name__ == "__main__":
    main()

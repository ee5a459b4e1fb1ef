#!/usr/bin/env python3
"""PyTorch side of the GPU training benchmark (bench/gpu/run_gpu_bench.sh, issue 28).

The models of bench/gpu/run_gpu_bench.sh written as the field writes them for a GPU (nanoGPT's
way): scaled_dot_product_attention (flash), bf16 autocast over fp32 master weights, fused AdamW,
eager or torch.compile. One JSON line per run: step time, tokens/s, model TFLOP/s by Megatron's
formula (the one pretrain_gpt logs), MFU against --peak-tflops (the bf16 GEMM rate the runner
measures in the same run) and against the datasheet's 989 TFLOP/s (H100 SXM dense bf16), and
the peak device memory.

  python3 bench/gpu/torch_gpu_bench.py --config gpt2-124m|llama-1b [--compile] [--steps N]
      [--warmup N] [--peak-tflops T] [--device cuda]
  python3 bench/gpu/torch_gpu_bench.py --gemm-peak      # the bf16 GEMM rate, 8192^3, TFLOP/s

Not yet run on a GPU (no session has had one); --device cpu --config smoke checks it anywhere.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytorch_train import megatron_flops  # noqa: E402  (the CPU benchmark's: one formula for both)

CONFIGS = {
    "gpt2-124m": dict(layers=12, hidden=768, heads=12, groups=12, ffn=3072, seq=1024, mbs=8, vocab=50304,
                      llama=False),
    # LLaMA-style ~1.1B (TinyLlama's shape): GQA 32/4, SwiGLU, RMSNorm, RoPE, untied output.
    "llama-1b": dict(layers=22, hidden=2048, heads=32, groups=4, ffn=5632, seq=2048, mbs=4, vocab=32000,
                     llama=True),
    "smoke": dict(layers=2, hidden=64, heads=4, groups=2, ffn=128, seq=32, mbs=2, vocab=256, llama=True),
}
DATASHEET_BF16_TFLOPS = 989.0  # H100 SXM, dense bf16


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]  # torch < 2.0 (the smoke check only)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), 1)
    return att.masked_fill(mask, float("-inf")).softmax(-1) @ v


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads, self.groups, self.llama = c["hidden"], c["heads"], c["groups"], c["llama"]
        self.d = h // self.heads
        norm = (lambda: RMSNorm(h)) if self.llama else (lambda: nn.LayerNorm(h))
        self.ln1, self.ln2 = norm(), norm()
        self.qkv = nn.Linear(h, (self.heads + 2 * self.groups) * self.d, bias=not self.llama)
        self.proj = nn.Linear(h, h, bias=not self.llama)
        self.fc1 = nn.Linear(h, 2 * c["ffn"] if self.llama else c["ffn"], bias=not self.llama)
        self.fc2 = nn.Linear(c["ffn"], h, bias=not self.llama)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split([self.heads * self.d, self.groups * self.d, self.groups * self.d], -1)
        q = q.view(B, T, self.heads, self.d).transpose(1, 2)
        k = k.view(B, T, self.groups, self.d).transpose(1, 2)
        v = v.view(B, T, self.groups, self.d).transpose(1, 2)
        if self.llama:
            def rope(t):
                t1, t2 = t[..., : self.d // 2], t[..., self.d // 2:]
                return t * cos[:T] + torch.cat([-t2, t1], -1) * sin[:T]
            q, k = rope(q), rope(k)
        if self.groups != self.heads:
            k = k.repeat_interleave(self.heads // self.groups, dim=1)
            v = v.repeat_interleave(self.heads // self.groups, dim=1)
        x = x + self.proj(attention(q, k, v).transpose(1, 2).reshape(B, T, C))
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
        self.wpe = None if c["llama"] else nn.Embedding(c["seq"], c["hidden"])
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
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def gemm_peak(device, n=8192, calls=20):
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        a @ b
    torch.cuda.synchronize()
    return 2.0 * n ** 3 * calls / (time.perf_counter() - t) / 1e12


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="gpt2-124m", choices=sorted(CONFIGS))
    p.add_argument("--compile", action="store_true")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=0.0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gemm-peak", action="store_true")
    a = p.parse_args()
    if a.gemm_peak:
        print(json.dumps({"bf16_gemm_peak_tflops": round(gemm_peak(a.device), 1)}), flush=True)
        return
    cuda = a.device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32; the GEMMs run in bf16 under autocast
    torch.manual_seed(0)
    c = CONFIGS[a.config]
    model = GPT(c).to(a.device)
    with torch.no_grad():  # Megatron's initialisation: N(0, 0.02) weights, zero biases
        for n, prm in model.named_parameters():
            if prm.dim() >= 2:
                prm.normal_(0.0, 0.02)
            elif n.endswith("bias"):
                prm.zero_()
    decay = [q for q in model.parameters() if q.dim() >= 2]
    other = [q for q in model.parameters() if q.dim() < 2]
    extra = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), **extra)
    fwd = torch.compile(model) if a.compile else model
    idx = torch.randint(0, c["vocab"], (c["mbs"], c["seq"]), device=a.device)
    tgt = torch.randint(0, c["vocab"], (c["mbs"], c["seq"]), device=a.device)
    amp = torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)

    def step():
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = fwd(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    sec = (time.perf_counter() - t) / a.steps
    flops = megatron_flops(c, c["mbs"]) / sec / 1e12
    print(json.dumps({
        "impl": "pytorch " + torch.__version__ + (" compile" if a.compile else " eager"), "config": a.config,
        "params": sum(q.numel() for q in model.parameters()), "step_s": round(sec, 4),
        "tokens_per_s": round(c["mbs"] * c["seq"] / sec, 1), "tflops": round(flops, 2),
        "mfu": round(flops / a.peak_tflops, 4) if a.peak_tflops else 0.0,
        "mfu_datasheet": round(flops / DATASHEET_BF16_TFLOPS, 4), "loss": round(float(loss), 4),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2 ** 30, 2) if cuda else 0.0,
    }), flush=True)


if __name__ == "__main__":
    main()

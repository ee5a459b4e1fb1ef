#!/usr/bin/python3
"""Writes tests/golden/alibi/alibi.safetensors, the PyTorch fixture of the ALiBi tests
(tests/kernels/alibi_test.cpp).

Run with Debian's interpreter (it has python3-torch):
  /usr/bin/python3 gen_alibi.py [--out FILE]
The output is committed, so CI needs no PyTorch.

Contents (all fp32):
  bloom_slopes_<n>   [n] for n in 8, 12, 32, 40: the slopes of BLOOM's build_alibi_tensor
                     (fp32 powers, as Hugging Face computes them), read back from the bias
                     at key position 1;
  mindspeed_slopes_<n> [n]: MindSpeed's get_slopes (Python doubles) rounded to fp32;
  q [B, H, T, D], k, v [B, H, T, D], dout [T, B, H*D]: one small causal attention problem;
  <form>_out [T, B, H*D], <form>_lse [B, H, T], <form>_dq/_dk/_dv [B, H, T, D] for the bias
  forms bloom (slope * key position, BLOOM's attention: baddbmm of the bias with the scaled
  scores, causal mask, softmax), symmetric (-slope * |j - i|, npu_fusion_attention
  pse_type 2) and sqrt (-slope * sqrt(|j - i|), pse_type 3); the gradients are of
  sum(out * dout). The attention is evaluated in float64 from the fp32 inputs.
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generate_fixtures import write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
B, H, T, D = 2, 12, 9, 8  # 12 heads: not a power of 2


def bloom_alibi(attention_mask, num_heads, dtype=torch.float32):
    """BLOOM's build_alibi_tensor: slopes * key position, [batch * heads, 1, keys]."""
    batch, seq = attention_mask.shape
    closest = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, num_heads - closest)
        extra_powers = torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    positions = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * positions
    return alibi.reshape(batch * num_heads, 1, seq).to(dtype)


def mindspeed_slopes(n):
    """MindSpeed's get_slopes (Python doubles)."""
    def power_of_2(m):
        start = 2 ** (-2 ** -(math.log2(m) - 3))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + mindspeed_slopes(2 * closest)[0::2][:n - closest]


def attention(q, k, v, bias):
    """Causal softmax(q k^T / sqrt(D) + bias) v in float64; bias [H, T, T] or [B*H, 1, T]."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D) + bias.reshape(-1, H, bias.shape[-2], T)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(causal, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, H, T, D]
    return out.permute(2, 0, 1, 3).reshape(T, B, H * D), lse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, "alibi", "alibi.safetensors"))
    args = parser.parse_args()
    torch.manual_seed(20250101)
    tensors = {}
    for n in (8, 12, 32, 40):
        alibi = bloom_alibi(torch.ones(1, 4, dtype=torch.int64), n)  # [n, 1, 4]
        tensors[f"bloom_slopes_{n}"] = alibi[:, 0, 1].contiguous()
        tensors[f"mindspeed_slopes_{n}"] = torch.tensor(mindspeed_slopes(n), dtype=torch.float32)
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    dout = torch.randn(T, B, H * D)
    tensors.update(q=q, k=k, v=v, dout=dout)
    slopes = torch.tensor(mindspeed_slopes(H), dtype=torch.float32).double()
    dist = (torch.arange(T)[None, :] - torch.arange(T)[:, None]).double()  # j - i
    forms = {
        "bloom": bloom_alibi(torch.ones(B, T, dtype=torch.int64), H, torch.float64),
        "symmetric": -slopes[:, None, None] * dist.abs()[None],
        "sqrt": -slopes[:, None, None] * dist.abs().sqrt()[None],
    }
    for name, bias in forms.items():
        if name != "bloom":
            bias = bias.unsqueeze(0).expand(B, H, T, T)
        q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
        out, lse = attention(q64, k64, v64, bias)
        (out * dout.double()).sum().backward()
        tensors[f"{name}_out"] = out.detach().float()
        tensors[f"{name}_lse"] = lse.detach().float()
        for g, x in (("dq", q64), ("dk", k64), ("dv", v64)):
            tensors[f"{name}_{g}"] = x.grad.float()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_safetensors(args.out, tensors)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes the PyTorch golden fixtures the C++ golden tests compare against.

Run with Debian's interpreter (it has python3-torch):
  /usr/bin/python3 generate_fixtures.py [--out DIR] [FIXTURE ...]
(default: every fixture, into this directory). The outputs are committed, so CI needs no
PyTorch; regenerate only the fixture you add (the C++ tests record numbers per fixture).

For a tiny GPT-2-style model (LayerNorm, learned positions, tanh GELU, biases, tied
embeddings), a tiny LLaMA-style model (RMSNorm, rotary, SwiGLU, GQA, untied, no biases) and
a LLaMA-style model with a sequence longer than one flash-attention key block (260 > 256
keys) and hidden and FFN sizes that are not multiples of 8 (the kernels' vector tails), and
a Qwen2-style model (q/k/v biases, head size other than hidden / heads, tied embeddings,
Llama 3.1 rope scaling),
written out with Hugging Face parameter names and layouts (so the same C++ loader imports
real checkpoints), this script writes, per model directory:
  config.json         the Hugging Face config
  model.safetensors   the weights (fp32)
  expected.safetensors
      tokens/labels/loss_mask [B, T] of one micro-batch, logits [B, T, Vp] (Megatron pads the
      vocabulary to Vp and the padded logits take part in the softmax), loss [1] (mean over
      unmasked tokens), grad.<hf name> for every parameter, and for a 5-step AdamW run
      (global batch = 2 micro-batches, Megatron's per-micro-batch token averaging, learning
      rate warmup then cosine decay with Megatron's OptimizerParamScheduler, weight decay on
      matrices only, global-norm clipping) train_tokens/train_labels/train_loss_mask
      [steps, micro, B, T], train_losses [steps] and train_grad_norms [steps].
  training.json       the optimizer settings used for the 5 steps.
Every value is computed in fp32 on the CPU, deterministically.
"""
import argparse
import json
import math
import os
import struct

import torch

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))

VOCAB, PADDED_VOCAB, B, T, STEPS, MICRO = 100, 128, 2, 16, 5, 2
TRAINING = dict(lr=1e-3, min_lr=1e-4, lr_warmup_iters=2, lr_decay_iters=5, lr_decay_style="cosine",
                weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, clip_grad=0.3,
                train_iters=STEPS, micro_batch_size=B, global_batch_size=B * MICRO, seq_length=T)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.float32:
            dtype, data = "F32", t.numpy().astype("<f4").tobytes()
        elif t.dtype == torch.int32:
            dtype, data = "I32", t.numpy().astype("<i4").tobytes()
        else:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)


def megatron_lr(cfg, num_steps):
    """megatron/core/optimizer_param_scheduler.py get_lr (steps counted in iterations)."""
    warm, decay = cfg["lr_warmup_iters"], cfg["lr_decay_iters"]
    if warm > 0 and num_steps <= warm:
        return cfg["lr"] * num_steps / warm
    if num_steps > decay:
        return cfg["min_lr"]
    ratio = (num_steps - warm) / (decay - warm)
    coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return cfg["min_lr"] + coeff * (cfg["lr"] - cfg["min_lr"])


VOCAB_PARAMS = ("transformer.wte.weight", "model.embed_tokens.weight", "lm_head.weight")


def padded(weight):
    """[V, h] -> [Vp, h] with zero rows, as the C++ loader pads. The padded rows are trained
    parameters from then on, as in Megatron (their logits take part in the softmax)."""
    return torch.cat([weight, torch.zeros(PADDED_VOCAB - weight.shape[0], weight.shape[1])], 0)


def hf_view(name, tensor):
    """The Hugging Face tensor: vocabulary matrices without the padding rows."""
    return tensor[:VOCAB] if name in VOCAB_PARAMS else tensor


def causal_attention(q, k, v):
    """q [B, nq, T, D], k/v [B, nkv, T, D] -> [B, T, nq*D]."""
    T = q.shape[2]
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(q.shape[0], T, -1)


class Gpt2:
    cfg = dict(model_type="gpt2", vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
               activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    batch, seq = B, T

    def init(self, g):
        c, h = self.cfg, self.cfg["n_embd"]
        p = {"transformer.wte.weight": torch.randn(VOCAB, h, generator=g) * 0.2,
             "transformer.wpe.weight": torch.randn(c["n_positions"], h, generator=g) * 0.1}
        for i in range(c["n_layer"]):
            pre = f"transformer.h.{i}."
            for ln in ("ln_1", "ln_2"):
                p[pre + ln + ".weight"] = 1 + 0.1 * torch.randn(h, generator=g)
                p[pre + ln + ".bias"] = 0.1 * torch.randn(h, generator=g)
            for name, shape in (("attn.c_attn", (h, 3 * h)), ("attn.c_proj", (h, h)),
                                ("mlp.c_fc", (h, 4 * h)), ("mlp.c_proj", (4 * h, h))):
                p[pre + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
                p[pre + name + ".bias"] = 0.1 * torch.randn(shape[1], generator=g)
        p["transformer.ln_f.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        p["transformer.ln_f.bias"] = 0.1 * torch.randn(h, generator=g)
        return p

    def logits(self, p, tokens):
        B, T = tokens.shape
        c, h = self.cfg, self.cfg["n_embd"]
        nh, d = c["n_head"], h // c["n_head"]
        eps = c["layer_norm_epsilon"]
        x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][torch.arange(T)]
        for i in range(c["n_layer"]):
            pre = f"transformer.h.{i}."
            y = torch.nn.functional.layer_norm(x, (h,), p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], eps)
            qkv = y @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
            q, k, v = (t.view(B, T, nh, d).transpose(1, 2) for t in qkv.split(h, dim=-1))
            a = causal_attention(q, k, v)
            x = x + a @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
            y = torch.nn.functional.layer_norm(x, (h,), p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], eps)
            m = torch.nn.functional.gelu(y @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"],
                                         approximate="tanh")
            x = x + m @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]
        x = torch.nn.functional.layer_norm(x, (h,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
        return x @ p["transformer.wte.weight"].t()

    def decays(self, name):
        return name.endswith(".weight") and "ln_" not in name


class Llama:
    cfg = dict(model_type="llama", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               max_position_embeddings=32, rms_norm_eps=1e-6, rope_theta=10000.0,
               hidden_act="silu", tie_word_embeddings=False)
    batch, seq = B, T

    def init(self, g):
        c, h, f = self.cfg, self.cfg["hidden_size"], self.cfg["intermediate_size"]
        d = h // c["num_attention_heads"]
        kv = c["num_key_value_heads"] * d
        p = {"model.embed_tokens.weight": torch.randn(VOCAB, h, generator=g) * 0.2}
        for i in range(c["num_hidden_layers"]):
            pre = f"model.layers.{i}."
            p[pre + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
            p[pre + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
            for name, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (kv, h)),
                                ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, h)),
                                ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)), ("mlp.down_proj", (h, f))):
                p[pre + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
        p["model.norm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        p["lm_head.weight"] = torch.randn(VOCAB, h, generator=g) * 0.2
        return p

    @staticmethod
    def rms(x, w, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def head_dim(self):
        return self.cfg.get("head_dim") or self.cfg["hidden_size"] // self.cfg["num_attention_heads"]

    def inv_freq(self):
        c, d = self.cfg, self.head_dim()
        return 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2).float() / d))

    def logits(self, p, tokens):
        """LLaMA-style forward; q/k/v biases when the parameters have them, the word embedding
        as the output layer when there is no lm_head (tied)."""
        B, T = tokens.shape
        c = self.cfg
        nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
        d, eps = self.head_dim(), c["rms_norm_eps"]
        freqs = torch.outer(torch.arange(T).float(), self.inv_freq())
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos(), emb.sin()

        def rope(t):
            t1, t2 = t[..., : d // 2], t[..., d // 2:]
            return t * cos + torch.cat([-t2, t1], -1) * sin

        def proj(y, pre, name, heads):
            out = y @ p[pre + name + ".weight"].t()
            if pre + name + ".bias" in p:
                out = out + p[pre + name + ".bias"]
            return out.view(B, T, heads, d).transpose(1, 2)

        x = p["model.embed_tokens.weight"][tokens]
        for i in range(c["num_hidden_layers"]):
            pre = f"model.layers.{i}."
            y = self.rms(x, p[pre + "input_layernorm.weight"], eps)
            q = proj(y, pre, "self_attn.q_proj", nh)
            k = proj(y, pre, "self_attn.k_proj", nkv)
            v = proj(y, pre, "self_attn.v_proj", nkv)
            a = causal_attention(rope(q), rope(k), v)
            x = x + a @ p[pre + "self_attn.o_proj.weight"].t()
            y = self.rms(x, p[pre + "post_attention_layernorm.weight"], eps)
            gate = y @ p[pre + "mlp.gate_proj.weight"].t()
            up = y @ p[pre + "mlp.up_proj.weight"].t()
            x = x + (torch.nn.functional.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].t()
        x = self.rms(x, p["model.norm.weight"], eps)
        return x @ p.get("lm_head.weight", p["model.embed_tokens.weight"]).t()

    def decays(self, name):
        return "norm" not in name


class LlamaLongOdd(Llama):
    """Sequence 260 (two flash key blocks of 256), hidden 36 and FFN 44 (not multiples of 8),
    6 heads of 6 in 2 query groups; one sample per micro-batch to keep the fixture small."""
    cfg = dict(Llama.cfg, hidden_size=36, intermediate_size=44, num_attention_heads=6, num_key_value_heads=2,
               max_position_embeddings=260)
    batch, seq = 1, 260


class Qwen2Scaled(Llama):
    """Qwen2-style: q/k/v biases, a head size (12) other than hidden / heads (8), tied
    embeddings, and Llama 3.1 rotary frequency scaling (factor 4 over an original context of
    16 positions, so low, medium and high frequencies all occur at head size 12)."""
    cfg = dict(Llama.cfg, model_type="qwen2", head_dim=12, intermediate_size=48, tie_word_embeddings=True,
               rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position_embeddings=16))

    def init(self, g):
        c, h, f = self.cfg, self.cfg["hidden_size"], self.cfg["intermediate_size"]
        d, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
        p = {"model.embed_tokens.weight": torch.randn(VOCAB, h, generator=g) * 0.2}
        for i in range(c["num_hidden_layers"]):
            pre = f"model.layers.{i}."
            p[pre + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
            p[pre + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
            for name, shape in (("self_attn.q_proj", (nh * d, h)), ("self_attn.k_proj", (nkv * d, h)),
                                ("self_attn.v_proj", (nkv * d, h)), ("self_attn.o_proj", (h, nh * d)),
                                ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)), ("mlp.down_proj", (h, f))):
                p[pre + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
            for name, n in (("self_attn.q_proj", nh * d), ("self_attn.k_proj", nkv * d), ("self_attn.v_proj", nkv * d)):
                p[pre + name + ".bias"] = torch.randn(n, generator=g) * 0.1
        p["model.norm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        return p

    def inv_freq(self):
        """transformers' _compute_llama3_parameters."""
        c, d = self.cfg, self.cfg["head_dim"]
        rs = c["rope_scaling"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / rs["low_freq_factor"], old / rs["high_freq_factor"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / rs["factor"], inv)
        smooth = (old / wavelen - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
        smoothed = (1 - smooth) * scaled / rs["factor"] + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)

    def decays(self, name):
        return "norm" not in name and not name.endswith(".bias")


def make_batch(g, B=B, T=T):
    tokens = torch.randint(0, VOCAB, (B, T + 1), generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.2).float()
    return tokens[:, :T].int(), tokens[:, 1:].int(), mask


def token_losses(model, p, tokens, labels):
    logits = model.logits(p, tokens.long())
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, PADDED_VOCAB), labels.long().reshape(-1),
                                               reduction="none").view(tokens.shape)
    return logits, losses


def generate(model, name, seed, out=HERE):
    B, T = model.batch, model.seq
    out_dir = os.path.join(out, name)
    os.makedirs(out_dir, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    params = {k: (padded(v) if k in VOCAB_PARAMS else v).clone().requires_grad_(True)
              for k, v in model.init(g).items()}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), {k: hf_view(k, v) for k, v in params.items()})

    expected = {}
    tokens, labels, mask = make_batch(g, B, T)
    logits, losses = token_losses(model, params, tokens, labels)
    loss = (losses * mask).sum() / mask.sum()
    loss.backward()
    expected.update(tokens=tokens, labels=labels, loss_mask=mask, logits=logits.detach(),
                    loss=loss.detach().view(1))
    for k, v in params.items():
        expected["grad." + k] = hf_view(k, v.grad.detach().clone())
        v.grad = None

    # Five AdamW steps, two micro-batches each, Megatron's loss and schedule.
    cfg = dict(TRAINING, micro_batch_size=B, global_batch_size=B * MICRO, seq_length=T)
    decay = [v for k, v in params.items() if model.decays(k)]
    no_decay = [v for k, v in params.items() if not model.decays(k)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=0.0, betas=(cfg["adam_beta1"], cfg["adam_beta2"]), eps=cfg["adam_eps"],
                            foreach=False)
    train = {"train_tokens": [], "train_labels": [], "train_loss_mask": []}
    step_losses, norms = [], []
    for step in range(STEPS):
        loss_sum, tokens_sum = 0.0, 0.0
        for _ in range(MICRO):
            tokens, labels, mask = make_batch(g, B, T)
            train["train_tokens"].append(tokens)
            train["train_labels"].append(labels)
            train["train_loss_mask"].append(mask)
            _, losses = token_losses(model, params, tokens, labels)
            objective = (losses * mask).sum() / mask.sum() / MICRO
            objective.backward()
            loss_sum += float((losses * mask).sum())
            tokens_sum += float(mask.sum())
        step_losses.append(loss_sum / tokens_sum)
        norm = torch.sqrt(sum((v.grad.double() ** 2).sum() for v in params.values()))
        norms.append(float(norm))
        coeff = cfg["clip_grad"] / (float(norm) + 1e-6)
        if coeff < 1.0:
            for v in params.values():
                v.grad.mul_(coeff)
        for group in opt.param_groups:
            group["lr"] = megatron_lr(cfg, step)  # iteration step+1 uses lr after `step` steps
        opt.step()
        opt.zero_grad(set_to_none=False)
    for k, v in train.items():
        expected[k] = torch.stack(v).view(STEPS, MICRO, B, T)
    expected["train_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    expected["train_grad_norms"] = torch.tensor(norms, dtype=torch.float32)
    write_safetensors(os.path.join(out_dir, "expected.safetensors"), expected)
    with open(os.path.join(out_dir, "training.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"{name}: loss {float(loss):.6f}, train losses {[round(x, 6) for x in step_losses]}")


FIXTURES = {"gpt2_tiny": (Gpt2, 1), "llama_tiny": (Llama, 2), "llama_long_odd": (LlamaLongOdd, 3),
            "qwen2_scaled": (Qwen2Scaled, 4)}

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dtype = {"F32": torch.float32, "I32": torch.int32}[e["dtype"]]
        out[name] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=dtype).view(*e["shape"]).clone()
    return out


def logits_of_export(name, out=HERE):
    """PyTorch's logits of the model the C++ golden test trained for 5 steps and exported to
    Hugging Face files (<name>/trained_export, committed), read with this script's own model,
    on the fixture's tokens: <name>/trained_export/expected_logits.safetensors."""
    model, _ = FIXTURES[name]
    model = model()
    export = os.path.join(out, name, "trained_export")
    cfg = json.load(open(os.path.join(export, "config.json")))
    for key in ("hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head"):
        if key in model.cfg:
            assert cfg[key] == model.cfg[key], f"{key}: export {cfg[key]} vs fixture {model.cfg[key]}"
    params = {k: (padded(v) if k in VOCAB_PARAMS else v) for k, v in read_safetensors(os.path.join(export, "model.safetensors")).items()}
    tokens = read_safetensors(os.path.join(out, name, "expected.safetensors"))["tokens"]
    with torch.no_grad():
        logits = model.logits(params, tokens.long())
    write_safetensors(os.path.join(export, "expected_logits.safetensors"), {"logits": logits})
    print(f"{name}: logits of the trained export written")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE, help="directory the fixture directories go into")
    parser.add_argument("fixtures", nargs="*", choices=[[]] + list(FIXTURES), help="default: all")
    parser.add_argument("--logits-of-export", action="store_true",
                        help="instead: PyTorch's logits of <fixture>/trained_export (written by the C++ golden "
                             "test with MS_RECORD_NUMBERS=1)")
    args = parser.parse_args()
    for name in args.fixtures or list(FIXTURES):
        if args.logits_of_export:
            logits_of_export(name, args.out)
            continue
        model, seed = FIXTURES[name]
        generate(model(), name, seed, args.out)

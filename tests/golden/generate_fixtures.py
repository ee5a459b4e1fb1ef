#!/usr/bin/python3
"""Writes the PyTorch golden fixtures the C++ golden tests compare against.

Run with Debian's interpreter (it has python3-torch):
  /usr/bin/python3 generate_fixtures.py [--out DIR] [FIXTURE ...]
(default: every fixture, into this directory). The outputs are committed, so CI needs no
PyTorch; regenerate only the fixture you add (the C++ tests record numbers per fixture).
  /usr/bin/python3 generate_fixtures.py --check
checks the mixture-of-experts block against independent formulations (see self_check).

For a tiny GPT-2-style model (LayerNorm, learned positions, tanh GELU, biases, tied
embeddings), a tiny LLaMA-style model (RMSNorm, rotary, SwiGLU, GQA, untied, no biases) and
a LLaMA-style model with a sequence longer than one flash-attention key block (260 > 256
keys) and hidden and FFN sizes that are not multiples of 8 (the kernels' vector tails), and
a Qwen2-style model (q/k/v biases, head size other than hidden / heads, tied embeddings,
Llama 3.1 rope scaling), and a Mixtral-style model (the tiny LLaMA with every MLP a sparse
mixture of 4 SwiGLU experts, top 2, with Megatron's auxiliary losses; see below),
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

mixtral_tiny follows Megatron core_v0.12.1's MoE (TopKRouter with aux_loss balancing, softmax
score function, no pre-softmax, no capacity, no jitter), with Hugging Face MixtralForCausalLM
names (block_sparse_moe.gate.weight [E, h], experts.M.w1/w3 [F, h] gate/up, w2 [h, F] down):
  routing     router logits = y W_gate^T in fp32; per token the top k logits, probs = softmax
              over those k (the same as HF's softmax over all E, top k, renormalise), zero for
              the other experts; token output = sum over its k experts of prob * w2(silu(w1 y)
              * w3 y).
  aux loss    per MoE layer, switch_load_balancing_loss_func: E * coeff / (N^2 k) * sum_e
              (sum_t softmax(logits)[t, e]) * tokens_per_expert[e], N = B*T tokens of the
              micro-batch, the token counts without gradient; coeff = moe_aux_loss_coeff 0.01.
  z loss      per MoE layer, z_loss_func: z_coeff * mean_t logsumexp(logits_t)^2, z_coeff =
              moe_z_loss_coeff 0.001.
  gradients   like MoEAuxLossAutoScaler, every layer's aux and z loss gradient enters with the
              main loss's scale 1 / micro-batches: per micro-batch the objective is
              lm_loss / micro + sum over layers (aux + z) / micro. The single micro-batch
              grad.<name> are those of lm_loss + sum over layers (aux + z) (micro = 1), and
              train_grad_norms include the router-loss gradients. The router weight takes weight
              decay (a matrix).
  recorded    loss and train_losses stay the LM loss (Megatron's "lm loss"). For the single
              micro-batch also aux_loss [1] and z_loss [1] (summed over the layers, coefficients
              included), router_probs.N [B*T, E] (fp32, zero off the top k) and routing_map.N
              [B*T, E] (int32 0/1) per layer N, tokens ordered b-major (row b*T + t; Megatron
              flattens [s, b], the losses do not depend on the order). Per step
              train_aux_losses [steps] and train_z_losses [steps]: Megatron's logged
              load_balancing_loss and z_loss, i.e. (sum over layers and micro-batches of aux /
              coeff, resp. z / z_coeff) / MoE layers / micro-batches.
  training.json adds moe_aux_loss_coeff, moe_z_loss_coeff, moe_router_topk and
              moe_router_load_balancing_type.
The seed is one whose every forward pass (the micro-batch and all 10 training micro-batches)
has every expert given tokens and the k-th and (k+1)-th largest router logits of each token at
least 1e-3 apart (MoeRecord asserts it), so rounding elsewhere cannot flip a routing choice.
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
            x = x + self.mlp(p, pre, y)
        x = self.rms(x, p["model.norm.weight"], eps)
        return x @ p.get("lm_head.weight", p["model.embed_tokens.weight"]).t()

    def mlp(self, p, pre, y):
        """SwiGLU: down(silu(gate y) * up y)."""
        gate = y @ p[pre + "mlp.gate_proj.weight"].t()
        up = y @ p[pre + "mlp.up_proj.weight"].t()
        return (torch.nn.functional.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].t()

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


def at_least_fp32(t):
    """Megatron computes the router softmaxes in fp32; fp64 stays fp64 (the --check
    finite differences)."""
    return torch.promote_types(t.dtype, torch.float32)


def topk_routing(logits, k):
    """Megatron's topk_softmax_with_capacity (softmax score function, no pre-softmax, no
    capacity): top-k of the router logits, softmax over the k selected. Returns the dense probs
    [N, E] (zero off the top k) and the routing map [N, E] (bool)."""
    top, idx = torch.topk(logits, k=k, dim=1)
    probs = torch.zeros_like(logits).scatter(1, idx, torch.softmax(top, dim=-1, dtype=at_least_fp32(logits)))
    routing_map = torch.zeros_like(logits, dtype=torch.int32).scatter(1, idx, 1).bool()
    return probs, routing_map


def load_balancing_loss(logits, routing_map, k, coeff):
    """Megatron's switch_load_balancing_loss_func: E * coeff / (N^2 k) * sum_e (sum_t
    softmax(logits)[t, e]) * tokens_per_expert[e]; the token counts carry no gradient."""
    n, e = logits.shape
    scores = torch.softmax(logits, dim=-1, dtype=at_least_fp32(logits))
    tokens_per_expert = routing_map.sum(dim=0)
    return torch.sum(scores.sum(dim=0) * tokens_per_expert) * (e * coeff / (n * n * k))


def z_loss(logits, coeff):
    """Megatron's z_loss_func: coeff * mean over tokens of logsumexp(logits)^2."""
    return torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * coeff


def swiglu_expert(p, name, x):
    """One Mixtral expert: w2(silu(w1 x) * w3 x)."""
    h = torch.nn.functional.silu(x @ p[name + "w1.weight"].t()) * (x @ p[name + "w3.weight"].t())
    return h @ p[name + "w2.weight"].t()


class Mixtral(Llama):
    """Mixtral-style: the LLaMA model with every MLP a sparse mixture of experts (4 SwiGLU
    experts, top 2), Hugging Face MixtralForCausalLM names, Megatron's routing and auxiliary
    losses. logits() leaves per layer, in self.routed, the router logits, dense probs, routing
    map and the raw (coefficient included) load-balancing and z losses; tokens are flattened
    b-major (row b*T + t)."""
    cfg = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", vocab_size=VOCAB, hidden_size=32,
               intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               max_position_embeddings=32, rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu",
               tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.01,
               router_jitter_noise=0.0, output_router_logits=False, sliding_window=None, attention_dropout=0.0,
               bos_token_id=1, eos_token_id=2, torch_dtype="float32")
    aux_coeff, z_coeff = 0.01, 0.001
    moe_training = dict(moe_aux_loss_coeff=aux_coeff, moe_z_loss_coeff=z_coeff, moe_router_topk=2,
                        moe_router_load_balancing_type="aux_loss")

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
                                ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, h))):
                p[pre + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
            moe = pre + "block_sparse_moe."
            p[moe + "gate.weight"] = torch.randn(c["num_local_experts"], h, generator=g) * 0.2
            for j in range(c["num_local_experts"]):
                for name, shape in (("w1", (f, h)), ("w3", (f, h)), ("w2", (h, f))):
                    p[f"{moe}experts.{j}.{name}.weight"] = torch.randn(*shape, generator=g) * 0.2
        p["model.norm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        p["lm_head.weight"] = torch.randn(VOCAB, h, generator=g) * 0.2
        return p

    def logits(self, p, tokens):
        self.routed = []
        return super().logits(p, tokens)

    def mlp(self, p, pre, y):
        """Sparse MoE: each expert runs on the tokens routed to it (gathered), its output
        scaled by the token's prob and added back at the token's row."""
        c = self.cfg
        k, shape = c["num_experts_per_tok"], y.shape
        x = y.reshape(-1, shape[-1])
        moe = pre + "block_sparse_moe."
        logits = x @ p[moe + "gate.weight"].t()
        probs, routing_map = topk_routing(logits, k)
        out = torch.zeros_like(x)
        for j in range(c["num_local_experts"]):
            rows = routing_map[:, j].nonzero().squeeze(1)
            out = out.index_add(0, rows, swiglu_expert(p, f"{moe}experts.{j}.", x[rows]) * probs[rows, j:j + 1])
        self.routed.append(dict(logits=logits, probs=probs, routing_map=routing_map,
                                aux=load_balancing_loss(logits, routing_map, k, self.aux_coeff),
                                z=z_loss(logits, self.z_coeff)))
        return out.view(shape)

    def router_objective(self):
        """Sum over the MoE layers of the last forward's load-balancing and z losses."""
        return sum(r["aux"] + r["z"] for r in self.routed)


class MoeRecord:
    """Checks that the routing is non-degenerate in every forward pass of a fixture: the k-th
    and (k+1)-th largest router logits of a token at least MIN_GAP apart (so float rounding in
    another implementation cannot flip a choice) and every expert given some tokens."""
    MIN_GAP = 1e-3

    def __init__(self, model):
        self.enabled = hasattr(model, "router_objective")
        self.min_gap, self.min_tokens = math.inf, math.inf

    def __bool__(self):
        return self.enabled

    def record(self, routed, where):
        for i, r in enumerate(routed):
            k = int(r["routing_map"][0].sum())
            top = torch.topk(r["logits"].detach(), k + 1, dim=1).values
            gap, tokens = float((top[:, k - 1] - top[:, k]).min()), int(r["routing_map"].sum(0).min())
            assert gap >= self.MIN_GAP, f"{where}, layer {i}: top-k gap {gap} (a near tie)"
            assert tokens > 0, f"{where}, layer {i}: an expert without tokens"
            self.min_gap, self.min_tokens = min(self.min_gap, gap), min(self.min_tokens, tokens)

    def __str__(self):
        return f"smallest top-k logit gap {self.min_gap:.3g}, fewest tokens of an expert {self.min_tokens}"


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
    moe = MoeRecord(model)
    # One micro-batch: the router losses enter with scale 1, as the LM loss does.
    (loss + model.router_objective() if moe else loss).backward()
    expected.update(tokens=tokens, labels=labels, loss_mask=mask, logits=logits.detach(),
                    loss=loss.detach().view(1))
    if moe:
        moe.record(model.routed, "micro-batch")
        expected.update(aux_loss=sum(r["aux"] for r in model.routed).detach().view(1),
                        z_loss=sum(r["z"] for r in model.routed).detach().view(1))
        for i, r in enumerate(model.routed):
            expected[f"router_probs.{i}"] = r["probs"].detach()
            expected[f"routing_map.{i}"] = r["routing_map"].int()
    for k, v in params.items():
        expected["grad." + k] = hf_view(k, v.grad.detach().clone())
        v.grad = None

    # Five AdamW steps, two micro-batches each, Megatron's loss and schedule.
    cfg = dict(TRAINING, micro_batch_size=B, global_batch_size=B * MICRO, seq_length=T,
               **getattr(model, "moe_training", {}))
    decay = [v for k, v in params.items() if model.decays(k)]
    no_decay = [v for k, v in params.items() if not model.decays(k)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=0.0, betas=(cfg["adam_beta1"], cfg["adam_beta2"]), eps=cfg["adam_eps"],
                            foreach=False)
    train = {"train_tokens": [], "train_labels": [], "train_loss_mask": []}
    step_losses, norms, aux_losses, z_losses = [], [], [], []
    for step in range(STEPS):
        loss_sum, tokens_sum, aux_sum, z_sum = 0.0, 0.0, 0.0, 0.0
        for _ in range(MICRO):
            tokens, labels, mask = make_batch(g, B, T)
            train["train_tokens"].append(tokens)
            train["train_labels"].append(labels)
            train["train_loss_mask"].append(mask)
            _, losses = token_losses(model, params, tokens, labels)
            objective = (losses * mask).sum() / mask.sum() / MICRO
            if moe:
                # MoEAuxLossAutoScaler: each router loss's gradient scaled by 1 / micro-batches.
                objective = objective + model.router_objective() / MICRO
                moe.record(model.routed, f"step {step}")
                aux_sum += sum(float(r["aux"]) for r in model.routed) / model.aux_coeff
                z_sum += sum(float(r["z"]) for r in model.routed) / model.z_coeff
            objective.backward()
            loss_sum += float((losses * mask).sum())
            tokens_sum += float(mask.sum())
        step_losses.append(loss_sum / tokens_sum)
        if moe:
            # Megatron's logged load_balancing_loss / z_loss: summed over layers and
            # micro-batches, over the MoE layers, times 1 / micro-batches.
            aux_losses.append(aux_sum / len(model.routed) / MICRO)
            z_losses.append(z_sum / len(model.routed) / MICRO)
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
    if moe:
        expected["train_aux_losses"] = torch.tensor(aux_losses, dtype=torch.float32)
        expected["train_z_losses"] = torch.tensor(z_losses, dtype=torch.float32)
        print(f"{name}: {moe}; aux loss {float(expected['aux_loss']):.6g}, z loss {float(expected['z_loss']):.6g}, "
              f"train aux losses {[round(x, 6) for x in aux_losses]}, train z losses {[round(x, 6) for x in z_losses]}")
    write_safetensors(os.path.join(out_dir, "expected.safetensors"), expected)
    with open(os.path.join(out_dir, "training.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"{name}: loss {float(loss):.6f}, train losses {[round(x, 6) for x in step_losses]}")


FIXTURES = {"gpt2_tiny": (Gpt2, 1), "llama_tiny": (Llama, 2), "llama_long_odd": (LlamaLongOdd, 3),
            "qwen2_scaled": (Qwen2Scaled, 4), "mixtral_tiny": (Mixtral, 34)}

def self_check():
    """--check: the Mixtral block against independent formulations, in torch."""
    torch.manual_seed(0)
    model = Mixtral()
    c = model.cfg
    E, k, h = c["num_local_experts"], c["num_experts_per_tok"], c["hidden_size"]
    p = model.init(torch.Generator().manual_seed(5))
    pre, moe = "model.layers.0.", "model.layers.0.block_sparse_moe."
    y = torch.randn(B, T, h)
    model.routed = []
    out = model.mlp(p, pre, y).reshape(-1, h)
    r = model.routed[0]

    # Routing: Hugging Face's softmax over all experts -> top k -> renormalise.
    x = y.reshape(-1, h)
    logits = x @ p[moe + "gate.weight"].t()
    weights, chosen = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    hf_map = torch.zeros(B * T, E, dtype=torch.bool).scatter(1, chosen, True)
    hf_probs = torch.zeros(B * T, E).scatter(1, chosen, weights)
    assert torch.equal(r["routing_map"], hf_map), "routing map differs from softmax -> top-k"
    assert torch.allclose(r["probs"], hf_probs, rtol=0, atol=1e-6), "probs differ from renormalised softmax"
    assert torch.allclose(r["probs"].sum(-1), torch.ones(B * T), atol=1e-6)

    # The sparse block against a dense loop: every expert on every token, masked by the map.
    dense = sum(hf_map[:, j:j + 1] * hf_probs[:, j:j + 1] * swiglu_expert(p, f"{moe}experts.{j}.", x)
                for j in range(E))
    err = float((out - dense).abs().max())
    assert err < 1e-5, f"sparse MoE vs dense loop: {err}"

    # The raw losses from their formulas written out element by element.
    scores, N = torch.softmax(logits, dim=-1), B * T
    aux = sum(float(scores[:, j].sum()) * int(hf_map[:, j].sum()) for j in range(E)) * E * model.aux_coeff / (N * N * k)
    z = sum(float(torch.log(torch.exp(logits[t]).sum())) ** 2 for t in range(N)) / N * model.z_coeff
    assert math.isclose(float(r["aux"]), aux, rel_tol=1e-5), (float(r["aux"]), aux)
    assert math.isclose(float(r["z"]), z, rel_tol=1e-5), (float(r["z"]), z)

    # Autograd against central differences, in fp64, on one router weight element: the
    # load-balancing loss alone (token counts held constant by the routing) and the whole
    # one-micro-batch objective (LM loss + every layer's load-balancing and z loss).
    p64 = {n: (padded(v) if n in VOCAB_PARAMS else v).double().requires_grad_(True) for n, v in p.items()}
    x64 = x.double()
    gate, (row, col), eps = moe + "gate.weight", (1, 3), 1e-6

    def aux_of(w):
        lg = x64 @ w.t()
        return load_balancing_loss(lg, topk_routing(lg, k)[1], k, model.aux_coeff)

    tokens, labels, mask = make_batch(torch.Generator().manual_seed(6))

    def objective_of(params):
        _, losses = token_losses(model, params, tokens, labels)
        return (losses * mask.double()).sum() / mask.sum() + model.router_objective()

    for name, f in (("load-balancing loss", lambda q: aux_of(q[gate])), ("whole objective", objective_of)):
        for v in p64.values():
            v.grad = None
        f(p64).backward()
        analytic = float(p64[gate].grad[row, col])
        with torch.no_grad():
            shifted = []
            for sign in (1, -1):
                q = dict(p64)
                q[gate] = p64[gate].clone()
                q[gate][row, col] += sign * eps
                shifted.append(float(f(q)))
        numeric = (shifted[0] - shifted[1]) / (2 * eps)
        assert math.isclose(analytic, numeric, rel_tol=1e-6, abs_tol=1e-10), (name, analytic, numeric)
        print(f"--check: d {name} / d {gate}[{row}, {col}]: autograd {analytic:.10g}, central difference {numeric:.10g}")
    print(f"--check: routing = softmax -> top-k -> renormalise, sparse block = dense loop (max diff {err:.2g}), "
          f"aux {float(r['aux']):.6g} and z {float(r['z']):.6g} as written out: ok")


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
    parser.add_argument("--check", action="store_true",
                        help="instead: check the Mixtral MoE block against independent formulations")
    parser.add_argument("--logits-of-export", action="store_true",
                        help="instead: PyTorch's logits of <fixture>/trained_export (written by the C++ golden "
                             "test with MS_RECORD_NUMBERS=1)")
    args = parser.parse_args()
    if args.check:
        self_check()
        raise SystemExit(0)
    for name in args.fixtures or list(FIXTURES):
        if args.logits_of_export:
            logits_of_export(name, args.out)
            continue
        model, seed = FIXTURES[name]
        generate(model(), name, seed, args.out)

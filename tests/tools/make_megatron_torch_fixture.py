#!/usr/bin/python3
"""Writes a Megatron-LM legacy (--ckpt-format torch) checkpoint of the tiny LLaMA golden
fixture, laid out as Megatron core_v0.12 saves a GPT model built with the local transformer
layer spec at tensor-parallel 2 x pipeline-parallel 2:

  megatron_torch_llama/latest_checkpointed_iteration.txt    "7"
  megatron_torch_llama/iter_0000007/mp_rank_0T_00P/model_optim_rng.pt
      {'args': argparse.Namespace(...), 'checkpoint_version': 3.0, 'iteration': 7,
       'model': OrderedDict(Megatron core names -> this rank's shard)}

Megatron's layouts, written here independently of the C++ importer that reads them:
  * linear_qkv rows per query group: [q of the group's heads, k, v] (each head_dim rows);
  * linear_fc1 (SwiGLU) = [gate; up]; under tensor parallelism each rank holds
    [its rows of gate; its rows of up];
  * column-parallel weights (linear_qkv, linear_fc1, word embeddings and output layer over
    the padded vocabulary) split along dim 0, row-parallel ones (linear_proj, linear_fc2)
    along dim 1, norms replicated;
  * pipeline stage p holds layers [p*L/P, (p+1)*L/P) under local names 0, 1, ...; stage 0
    the embedding, the last stage the final norm and the output layer.
Run with Debian's interpreter (python3-torch):  /usr/bin/python3 make_megatron_torch_fixture.py
"""
import argparse
import collections
import json
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "golden", "llama_tiny")
OUT = os.path.join(HERE, "data", "megatron_torch_llama")
TP, PP, ITERATION, PADDED_VOCAB = 2, 2, 7, 128


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32"
        a, b = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).view(*e["shape"]).clone()
    return out


def megatron_shards(source=SOURCE, tp=TP, pp=PP):
    """{(t, p): OrderedDict of Megatron core names -> that rank's shard} and the args fields."""
    cfg = json.load(open(os.path.join(source, "config.json")))
    hf = read_safetensors(os.path.join(source, "model.safetensors"))
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, ng = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // nh
    per_group = nh // ng

    def pad(w):
        return torch.cat([w, torch.zeros(PADDED_VOCAB - w.shape[0], w.shape[1])], 0)

    full = {"embedding.word_embeddings.weight": pad(hf["model.embed_tokens.weight"])}
    for i in range(L):
        pre, o = f"model.layers.{i}.", f"decoder.layers.{i}."
        q = hf[pre + "self_attn.q_proj.weight"].view(ng, per_group * d, h)
        k = hf[pre + "self_attn.k_proj.weight"].view(ng, d, h)
        v = hf[pre + "self_attn.v_proj.weight"].view(ng, d, h)
        full[o + "input_layernorm.weight"] = hf[pre + "input_layernorm.weight"]
        full[o + "self_attention.linear_qkv.weight"] = torch.cat([q, k, v], 1).reshape(-1, h)
        full[o + "self_attention.linear_proj.weight"] = hf[pre + "self_attn.o_proj.weight"]
        full[o + "pre_mlp_layernorm.weight"] = hf[pre + "post_attention_layernorm.weight"]
        full[o + "mlp.linear_fc1.weight"] = torch.cat([hf[pre + "mlp.gate_proj.weight"], hf[pre + "mlp.up_proj.weight"]], 0)
        full[o + "mlp.linear_fc2.weight"] = hf[pre + "mlp.down_proj.weight"]
    full["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
    full["output_layer.weight"] = pad(hf["lm_head.weight"])

    def shard(name, w, t):
        if name.endswith("linear_fc1.weight"):  # [gate; up]: each rank its rows of both
            gate, up = w.chunk(2, 0)
            return torch.cat([gate.chunk(tp, 0)[t], up.chunk(tp, 0)[t]], 0)
        if name.endswith(("linear_qkv.weight", "word_embeddings.weight")) or name == "output_layer.weight":
            return w.chunk(tp, 0)[t]
        if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
            return w.chunk(tp, 1)[t]
        return w  # norms: replicated

    per_stage = L // pp
    shards = {}
    for t in range(tp):
        for p in range(pp):
            model = collections.OrderedDict()
            if p == 0:
                model["embedding.word_embeddings.weight"] = shard("embedding.word_embeddings.weight",
                                                                  full["embedding.word_embeddings.weight"], t).clone()
            for local in range(per_stage):
                g = p * per_stage + local
                for name, w in full.items():
                    if name.startswith(f"decoder.layers.{g}."):
                        local_name = name.replace(f"decoder.layers.{g}.", f"decoder.layers.{local}.", 1)
                        model[local_name] = shard(name, w, t).clone()
            if p == pp - 1:
                model["decoder.final_layernorm.weight"] = full["decoder.final_layernorm.weight"].clone()
                model["output_layer.weight"] = shard("output_layer.weight", full["output_layer.weight"], t).clone()
            shards[(t, p)] = model
    return cfg, shards


def main():
    cfg, shards = megatron_shards()
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, ng = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    args = argparse.Namespace(
        num_layers=L, hidden_size=h, ffn_hidden_size=cfg["intermediate_size"], num_attention_heads=nh,
        kv_channels=h // nh, group_query_attention=ng != nh, num_query_groups=ng,
        max_position_embeddings=cfg["max_position_embeddings"], padded_vocab_size=PADDED_VOCAB,
        vocab_size=cfg["vocab_size"], normalization="RMSNorm", swiglu=True, position_embedding_type="rope",
        rotary_base=int(cfg["rope_theta"]), norm_epsilon=cfg["rms_norm_eps"],
        untie_embeddings_and_output_weights=True, add_bias_linear=False, add_qkv_bias=False,
        tensor_model_parallel_size=TP, pipeline_model_parallel_size=PP, transformer_impl="local",
        params_dtype=torch.float32, ckpt_format="torch", seq_length=16, iteration=ITERATION)
    for (t, p), model in shards.items():
        d_out = os.path.join(OUT, f"iter_{ITERATION:07d}", f"mp_rank_{t:02d}_{p:03d}")
        os.makedirs(d_out, exist_ok=True)
        torch.save({"args": args, "checkpoint_version": 3.0, "iteration": ITERATION, "model": model},
                   os.path.join(d_out, "model_optim_rng.pt"))
    with open(os.path.join(OUT, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(ITERATION))
    print("wrote", OUT)


if __name__ == "__main__":
    main()

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

It also writes a deterministic 6-layer LLaMA (tests/tools/data/llama6_hf, a Hugging Face
directory) and two virtual-pipeline checkpoints of it, where each rank file holds 'model0',
'model1', ... (one state dict per model chunk, layers numbered from 0 in each chunk):

  megatron_torch_llama6_vpp          TP2 x PP2 x 3 virtual stages (one layer per chunk)
  megatron_torch_llama6_uneven_vpp   TP1 x PP2 x 2 virtual stages, 2 layers on the first stage
  megatron_torch_llama6_vpp_ends     TP1 x PP2 x 2 virtual stages, the embedding and the loss
                                     counted as layers (--account-for-embedding/loss-in-pipeline-split)

The chunk (p, v) -> global layers map follows Megatron core_v0.12's counting of the layers a
chunk builds and of the offset of its first layer (layer_chunks below); chunk 0 of stage 0
holds the embedding, the last chunk of the last stage the final norm and the output layer.
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
TP, PP, ITERATION, DIVISIBLE_BY = 2, 2, 7, 128


def megatron_padded_vocab(vocab, divisible_by, tp):
    """Megatron's _vocab_size_with_padding: a multiple of --make-vocab-size-divisible-by x TP."""
    multiple = divisible_by * tp
    return (vocab + multiple - 1) // multiple * multiple


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


def layer_chunks(L, pp, vpp=None, first=None, last=None, embedding_layer=False, loss_layer=False):
    """{(p, v): [global layer of each local layer]}: how many layers chunk v of stage p builds
    and where they start, by Megatron core_v0.12's rules. embedding_layer / loss_layer:
    --account-for-embedding/loss-in-pipeline-split (even splits only)."""
    vp = vpp or 1
    assert not ((embedding_layer or loss_layer) and (first is not None or last is not None))
    # Layers of a stage: the uneven first/last stage as given, the rest split evenly; the
    # embedding and loss count as layers of an even split.
    rest, stages_left = L + embedding_layer + loss_layer, pp
    for n in (first, last):
        if n is not None:
            rest, stages_left = rest - n, stages_left - 1
    assert rest % stages_left == 0
    middle_per_stage = rest // stages_left

    def per_stage(p):
        if p == 0 and first is not None:
            return first
        if p == pp - 1 and last is not None:
            return last
        return middle_per_stage

    def offset(p, v):
        if first is None and last is None:
            n = L + embedding_layer + loss_layer
            shift = embedding_layer and (p, v) != (0, 0)  # the embedding took the first slot
            if vpp is None:
                return p * (n // pp) - shift
            return v * (n // vp) + p * (n // pp // vp) - shift
        f = 0 if first is None else first
        l_ = 0 if last is None else last
        middle_stages = pp - (first is not None) - (last is not None)
        if vpp is None:
            middle_rank = p if first is None else p - 1
            return 0 if p == 0 else middle_rank * ((L - f - l_) // middle_stages) + f
        per_chunk_first, per_chunk_last, per_chunk_middle = f // vp, l_ // vp, (L - f - l_) // vp
        total = per_chunk_first + per_chunk_middle + per_chunk_last
        if p == 0:
            return v * total
        return v * total + per_chunk_first + (p - 1) * (per_chunk_middle // middle_stages)

    chunks = {}
    for p in range(pp):
        assert per_stage(p) % vp == 0
        for v in range(vp):
            start, n = offset(p, v), per_stage(p) // vp
            n -= embedding_layer and (p, v) == (0, 0)
            n -= loss_layer and (p, v) == (pp - 1, vp - 1)
            chunks[(p, v)] = list(range(start, start + n))
    assert sorted(g for c in chunks.values() for g in c) == list(range(L)), chunks
    return chunks


def megatron_shards(source=SOURCE, tp=TP, pp=PP, vpp=None, first=None, last=None, divisible_by=DIVISIBLE_BY,
                    embedding_layer=False, loss_layer=False):
    """{(t, p): OrderedDict of Megatron core names -> that rank's shard} and the args fields;
    with virtual stages (vpp) {(t, p, v): that chunk's state dict} instead."""
    cfg = json.load(open(os.path.join(source, "config.json")))
    hf = read_safetensors(os.path.join(source, "model.safetensors"))
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, ng = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // nh
    per_group = nh // ng
    padded_vocab = megatron_padded_vocab(cfg["vocab_size"], divisible_by, tp)

    def pad(w):
        return torch.cat([w, torch.zeros(padded_vocab - w.shape[0], w.shape[1])], 0)

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

    chunks = layer_chunks(L, pp, vpp, first, last, embedding_layer, loss_layer)
    vp = vpp or 1
    shards = {}
    for t in range(tp):
        for p in range(pp):
            for v in range(vp):
                model = collections.OrderedDict()
                if p == 0 and v == 0:
                    model["embedding.word_embeddings.weight"] = shard("embedding.word_embeddings.weight",
                                                                      full["embedding.word_embeddings.weight"], t).clone()
                for local, g in enumerate(chunks[(p, v)]):
                    for name, w in full.items():
                        if name.startswith(f"decoder.layers.{g}."):
                            local_name = name.replace(f"decoder.layers.{g}.", f"decoder.layers.{local}.", 1)
                            model[local_name] = shard(name, w, t).clone()
                if p == pp - 1 and v == vp - 1:
                    model["decoder.final_layernorm.weight"] = full["decoder.final_layernorm.weight"].clone()
                    model["output_layer.weight"] = shard("output_layer.weight", full["output_layer.weight"], t).clone()
                shards[(t, p) if vpp is None else (t, p, v)] = model
    return cfg, shards


def megatron_args(cfg, tp, pp, divisible_by, **pipeline):
    """The argparse.Namespace Megatron saves, with `pipeline`'s fields last."""
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, ng = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    return argparse.Namespace(
        num_layers=L, hidden_size=h, ffn_hidden_size=cfg["intermediate_size"], num_attention_heads=nh,
        kv_channels=h // nh, group_query_attention=ng != nh, num_query_groups=ng,
        max_position_embeddings=cfg["max_position_embeddings"],
        padded_vocab_size=megatron_padded_vocab(cfg["vocab_size"], divisible_by, tp),
        make_vocab_size_divisible_by=divisible_by, vocab_size=cfg["vocab_size"], normalization="RMSNorm",
        swiglu=True, position_embedding_type="rope",
        rotary_base=int(cfg["rope_theta"]), norm_epsilon=cfg["rms_norm_eps"],
        untie_embeddings_and_output_weights=True, add_bias_linear=False, add_qkv_bias=False,
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, transformer_impl="local",
        params_dtype=torch.float32, ckpt_format="torch", seq_length=16, iteration=ITERATION, **pipeline)


def save_rank_files(out, args, shards, vpp=None):
    """iter_XXXXXXX/mp_rank_TT_PPP/model_optim_rng.pt per rank ('model', or 'model0', 'model1',
    ... with virtual stages) and the tracker."""
    ranks = sorted({k[:2] for k in shards})
    for t, p in ranks:
        d_out = os.path.join(out, f"iter_{ITERATION:07d}", f"mp_rank_{t:02d}_{p:03d}")
        os.makedirs(d_out, exist_ok=True)
        sd = {"args": args, "checkpoint_version": 3.0, "iteration": ITERATION}
        if vpp is None:
            sd["model"] = shards[(t, p)]
        else:
            for v in range(vpp):
                sd[f"model{v}"] = shards[(t, p, v)]
        torch.save(sd, os.path.join(d_out, "model_optim_rng.pt"))
    with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(ITERATION))
    print("wrote", out)


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, w in tensors.items():
        n = w.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(w.shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for w in tensors.values():
            f.write(w.contiguous().numpy().astype("<f4").tobytes())


def write_llama6(out):
    """A 6-layer LLaMA with GQA (4 heads, 2 groups, head_dim 2): seeded, tiny, deterministic."""
    cfg = {"model_type": "llama", "vocab_size": 30, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 16, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False}
    gen = torch.Generator().manual_seed(6)
    h, f, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * d

    def rand(*shape):
        return (torch.rand(*shape, generator=gen) - 0.5).mul(0.5)

    t = {"model.embed_tokens.weight": rand(cfg["vocab_size"], h)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        t[pre + "input_layernorm.weight"] = 1 + rand(h)
        t[pre + "self_attn.q_proj.weight"] = rand(h, h)
        t[pre + "self_attn.k_proj.weight"] = rand(kv, h)
        t[pre + "self_attn.v_proj.weight"] = rand(kv, h)
        t[pre + "self_attn.o_proj.weight"] = rand(h, h)
        t[pre + "post_attention_layernorm.weight"] = 1 + rand(h)
        t[pre + "mlp.gate_proj.weight"] = rand(f, h)
        t[pre + "mlp.up_proj.weight"] = rand(f, h)
        t[pre + "mlp.down_proj.weight"] = rand(h, f)
    t["model.norm.weight"] = 1 + rand(h)
    t["lm_head.weight"] = rand(cfg["vocab_size"], h)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    print("wrote", out)


def main():
    cfg, shards = megatron_shards()
    save_rank_files(OUT, megatron_args(cfg, TP, PP, DIVISIBLE_BY), shards)

    # Virtual pipelines. Megatron records the virtual size it derived, the flag it came from
    # (--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank) and
    # the uneven first/last stage sizes (None: even).
    data = os.path.join(HERE, "data")
    llama6 = os.path.join(data, "llama6_hf")
    write_llama6(llama6)
    cfg6 = json.load(open(os.path.join(llama6, "config.json")))
    for name, tp, pp, vpp, first, layers_per_chunk, ends in (
            ("megatron_torch_llama6_vpp", 2, 2, 3, None, 1, False),
            ("megatron_torch_llama6_uneven_vpp", 1, 2, 2, 2, None, False),
            ("megatron_torch_llama6_vpp_ends", 1, 2, 2, None, 2, True)):
        cfg6, shards = megatron_shards(llama6, tp, pp, vpp=vpp, first=first, divisible_by=16,
                                       embedding_layer=ends, loss_layer=ends)
        args = megatron_args(cfg6, tp, pp, 16, virtual_pipeline_model_parallel_size=vpp,
                             num_layers_per_virtual_pipeline_stage=layers_per_chunk,
                             num_virtual_stages_per_pipeline_rank=None if layers_per_chunk else vpp,
                             decoder_first_pipeline_num_layers=first, decoder_last_pipeline_num_layers=None,
                             account_for_embedding_in_pipeline_split=ends,
                             account_for_loss_in_pipeline_split=ends, encoder_pipeline_model_parallel_size=0)
        save_rank_files(os.path.join(data, name), args, shards, vpp)


if __name__ == "__main__":
    main()

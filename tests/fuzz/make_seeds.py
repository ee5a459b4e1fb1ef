#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/<target>/seed_* from the project's own test
fixtures (tests/datasets/reference, tests/golden, tests/tools/data, tests/tokenizer/reference,
data/gpt2) plus a few small hand-written files. Re-run after changing a fixture; inputs the
fuzzers found (crash_*, found_*) are kept as they are."""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
SPLIT = b"\n~~~~~~~~\n"  # fuzz_util.h kSplit


def read(*parts):
    with open(os.path.join(ROOT, *parts), "rb") as f:
        return f.read()


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed_" + name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> file bytes (header padded to 8)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def npy(descr, shape, raw, version=1):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    prefix = 10 if version == 1 else 12
    d += " " * (-(prefix + len(d) + 1) % 64) + "\n"
    head = b"\x93NUMPY" + bytes([version, 0])
    head += struct.pack("<H" if version == 1 else "<I", len(d))
    return head + d.encode() + raw


def main():
    # ---- safetensors
    f32 = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, 7)
    write("safetensors", "f32_i64", safetensors(
        [("w", "F32", [2, 3], f32), ("ids", "I64", [2], struct.pack("<2q", 5, -1))], {"format": "pt"}))
    write("safetensors", "bf16_f16_i32", safetensors(
        [("a", "BF16", [2], struct.pack("<2H", 0x3F80, 0xC000)),
         ("b", "F16", [3], struct.pack("<3H", 0x3C00, 0x0001, 0x7C00)),
         ("c", "I32", [1, 1], struct.pack("<i", 42)), ("empty", "F32", [0, 4], b"")]))
    write("safetensors", "scalar_u8_bool", safetensors(
        [("s", "F32", [], struct.pack("<f", 2.0)), ("u", "U8", [3], b"\x01\x02\x03"), ("m", "BOOL", [1], b"\x01")]))
    gpt2 = read("tests", "golden", "gpt2_tiny", "model.safetensors")
    n = struct.unpack("<Q", gpt2[:8])[0]
    write("safetensors", "gpt2_tiny_header_only", gpt2[:8 + n])  # tensors point past the end

    # ---- .idx/.bin (indexed_dataset): the reference datasets of every dtype
    ref = ("tests", "datasets", "reference")
    for name in ["u8", "i8", "i16", "u16", "i32", "i64", "f32", "f64", "mm", "empty", "u16b"]:
        write("indexed_dataset", name,
              read(*ref, "indexed_%s.idx" % name) + SPLIT + read(*ref, "indexed_%s.bin" % name))

    # ---- .npy: the Megatron cache files plus other dtypes and versions
    cache = os.path.join(ROOT, *ref, "megatron_cache")
    for f in sorted(os.listdir(cache)):
        if f.endswith(".npy"):
            write("npy", f.split("-")[-1], read(*ref, "megatron_cache", f))
    write("npy", "f8_2d", npy("<f8", "(2, 2)", struct.pack("<4d", 1, 2.5, -3, 0)))
    write("npy", "u1_v2", npy("|u1", "(3,)", b"\x01\x02\x03", version=2))
    write("npy", "i2_v3_scalar", npy("<i2", "()", struct.pack("<h", -5), version=3))
    write("npy", "u4_empty", npy("<u4", "(0, 5)", b""))

    # ---- config.json
    write("hf_config", "gpt2_tiny", read("tests", "golden", "gpt2_tiny", "config.json"))
    write("hf_config", "llama_tiny", read("tests", "golden", "llama_tiny", "config.json"))
    write("hf_config", "gpt2_nulls", json.dumps({
        "model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
        "n_head": 12, "n_inner": None, "activation_function": "gelu", "layer_norm_epsilon": 1e-5}).encode())
    write("hf_config", "llama_head_dim", json.dumps({
        "model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": 128,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "rope_scaling": None,
        "attention_bias": True, "hidden_act": "silu", "tie_word_embeddings": True}).encode())

    # ---- JSONL lines
    small = read("tests", "tools", "data", "small.jsonl").split(b"\n")
    write("jsonl", "small_head", b"\n".join(line[:300] for line in small[:3]) + b"\n")
    write("jsonl", "bad", read("tests", "tools", "data", "bad.jsonl"))
    write("jsonl", "null", read("tests", "tools", "data", "null.jsonl"))
    write("jsonl", "lists_crlf", b'{"text": ["one sentence.", "", "two \\u00e9"], "title": "1 2"}\r\n'
                                 b'{"text": "", "title": []}\r\n{"title": "5", "text": "\\ud83d\\ude00 x"}\n')

    # ---- GPT-2 vocab.json + merges.txt: the byte symbols of data/gpt2 and a few merges
    vocab = json.loads(read("data", "gpt2", "gpt2-vocab.json"))
    merges = read("data", "gpt2", "gpt2-merges.txt").decode("utf-8").split("\n")
    base = {k: v for k, v in vocab.items() if v < 256}
    tiny = dict(base, **{"he": 256, "ll": 257, "hell": 258, "<|endoftext|>": 259})
    write("gpt2_tokenizer", "tiny", json.dumps(tiny).encode() + SPLIT + b"#version: 0.2\nh e\nl l\nhe ll\n")
    first = dict(base)
    used = []
    for line in merges[1:121]:
        a, b = line.split(" ")
        if a in first and b in first:
            first.setdefault(a + b, len(first))
            used.append(line)
    first["<|endoftext|>"] = len(first)
    write("gpt2_tokenizer", "gpt2_first_merges", json.dumps(first, ensure_ascii=False).encode() + SPLIT +
          ("#version: 0.2\n" + "\n".join(used) + "\n").encode())
    write("gpt2_tokenizer", "crlf_no_final_newline",
          json.dumps(tiny).encode() + SPLIT + b"#version: 0.2\r\nh e\r\n\r\nl l\r\nhe ll")

    # ---- SentencePiece models
    for name in ["spm_bpe", "spm_unigram"]:
        write("sentencepiece", name, read("tests", "tokenizer", "reference", name + ".model"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

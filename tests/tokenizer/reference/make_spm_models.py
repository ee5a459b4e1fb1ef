#!/usr/bin/env python3
"""Trains the two tiny SentencePiece models used by the tokenizer tests with Debian's
spm_train (package `sentencepiece`, 0.1.97) and writes test vectors with spm_encode.

  spm_bpe.model      BPE, 1000 pieces, Llama-style options (byte fallback, split digits,
                     identity normalisation, whitespace kept); unk=0 bos=1 eos=2, no pad.
  spm_unigram.model  unigram, 400 pieces, identity normalisation, pad=3 and no BOS
                     (bos_id=-1): exercises the pad piece of SentencePieceTokenizer and
                     the refusal of Llama2Tokenizer.
  spm_vectors.jsonl  {"model": ..., "text": ..., "ids": [...]} from
                     `spm_encode --output_format=id` (plain encode: no BOS/EOS).

Training text: the first 300 chapters of data/corpus/kjv.jsonl.gz, split at ". ". Test
texts: hand-written cases and sentences of chapters 300.. (not seen in training).

    python3 tests/tokenizer/reference/make_spm_models.py
"""
import gzip
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

MODELS = {
    "spm_bpe": ["--model_type=bpe", "--vocab_size=1000", "--byte_fallback=true",
                "--split_digits=true", "--normalization_rule_name=identity",
                "--remove_extra_whitespaces=false", "--character_coverage=1.0"],
    "spm_unigram": ["--model_type=unigram", "--vocab_size=400", "--pad_id=3", "--bos_id=-1", "--normalization_rule_name=identity",
                    "--character_coverage=1.0"],
}

EDGE_CASES = [
    "Hello world", "hello  world", "  leading spaces", "trailing spaces  ", "a", "A", "1234567",
    "3.14 and 2,718", "café naïve résumé", "中文字", "日本語", "한국어", "😀 emoji 👍🏽",
    "Привет", "<unk> <s> </s>", "tab\there", "mixed CASE Words", "don't can't won't",
    "In the beginning God created the heaven and the earth.",
]


def main():
    with gzip.open(os.path.join(ROOT, "data/corpus/kjv.jsonl.gz"), "rt", encoding="utf-8") as f:
        chapters = [json.loads(line)["text"] for line in f]
    sentences = []
    for text in chapters[:300]:
        for part in text.replace("\n", " ").split(". "):
            if part.strip():
                sentences.append(part.strip() + ".")
    with tempfile.TemporaryDirectory() as tmp:
        train = os.path.join(tmp, "train.txt")
        with open(train, "w", encoding="utf-8") as f:
            f.write("\n".join(sentences) + "\n")
        for name, options in MODELS.items():
            subprocess.run(["spm_train", f"--input={train}", f"--model_prefix={tmp}/{name}",
                            "--num_threads=1", "--minloglevel=2"] + options, check=True)
            os.replace(f"{tmp}/{name}.model", os.path.join(HERE, f"{name}.model"))

    # Test texts: edge cases plus every 7th sentence of chapters 300..1188 (unseen text).
    tail = []
    for text in chapters[300:]:
        tail.extend(p.strip() for p in text.replace("\n", " ").split(". ") if p.strip())
    texts = EDGE_CASES + tail[::7][:250]
    with open(os.path.join(HERE, "spm_vectors.jsonl"), "w", encoding="utf-8") as out:
        for name in MODELS:
            result = subprocess.run(["spm_encode", f"--model={HERE}/{name}.model",
                                     "--output_format=id"], input="\n".join(texts) + "\n",
                                    capture_output=True, text=True, check=True)
            lines = result.stdout.split("\n")[:len(texts)]
            for text, line in zip(texts, lines):
                ids = [int(x) for x in line.split()]
                out.write(json.dumps({"model": name, "text": text, "ids": ids}) + "\n")
    print("wrote spm_bpe.model, spm_unigram.model and spm_vectors.jsonl")


if __name__ == "__main__":
    main()

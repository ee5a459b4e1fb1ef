#!/usr/bin/env python3
"""Cross-checks gpt2_vectors.jsonl against Megatron's GPT-2 BPE semantics and writes
gpt2_megatron_vectors.jsonl, the cases where Megatron and the npm gpt-3-encoder differ.

An independent, minimal re-statement of megatron/training/tokenizer/gpt2_tokenization.py's
algorithm (pattern with the `regex` module, bytes_to_unicode, merges by rank applied to all
occurrences, merges file read as read().split('\\n')[1:-1]); it needs `pip install regex`.

    python3 tests/tokenizer/reference/megatron_gpt2.py
"""
import json
import os

import regex

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_symbols():
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Gpt2:
    def __init__(self, vocab_file, merges_file):
        with open(vocab_file, encoding="utf-8") as f:
            self.vocab = json.load(f)
        with open(merges_file, encoding="utf-8") as f:
            lines = f.read().split("\n")[1:-1]
        self.ranks = {}
        for rank, line in enumerate(lines):
            self.ranks[tuple(line.split())] = rank
        self.symbols = byte_symbols()

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            ranked = [(self.ranks.get((a, b)), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            ranked = [r for r in ranked if r[0] is not None]
            if not ranked:
                break
            _, at = min(ranked)
            first, second = word[at], word[at + 1]
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def encode(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            mapped = "".join(self.symbols[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[s] for s in self.bpe(mapped))
        return ids


def main():
    tok = Gpt2(os.path.join(ROOT, "data/gpt2/gpt2-vocab.json"),
               os.path.join(ROOT, "data/gpt2/gpt2-merges.txt"))
    mismatches = 0
    count = 0
    with open(os.path.join(HERE, "gpt2_vectors.jsonl"), encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            count += 1
            if tok.encode(case["text"]) != case["ids"]:
                mismatches += 1
                print("MISMATCH", json.dumps(case["text"])[:120])
    print(f"{count} npm vectors checked, {mismatches} differ from Megatron's algorithm")

    # Where JavaScript's \s (U+FEFF yes, U+0085 no) and regex's \s (the reverse) differ.
    divergent = ["a\u0085b", "a \u0085b", "\u0085\u0085x", "x\u0085", "a\ufeffb", " \ufeffx",
                 "\ufeff\ufeff", "\ufeff hello", "a\u0085\u0085 b\ufeff\ufeff c"]
    with open(os.path.join(HERE, "gpt2_megatron_vectors.jsonl"), "w", encoding="utf-8") as f:
        for text in divergent:
            f.write(json.dumps({"text": text, "ids": tok.encode(text)}) + "\n")
    print(f"wrote {len(divergent)} Megatron-only vectors")


if __name__ == "__main__":
    main()

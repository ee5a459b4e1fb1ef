#!/usr/bin/env python3
"""Writes the inputs and the expected outputs of the preprocess_data / merge_datasets tests.

Inputs (tests/tools/data/): small.jsonl (+ .gz), bad.jsonl, null.jsonl, spm.jsonl.
Expected outputs (tests/tools/reference/): <name>_<key>_document.bin/.idx, made without any
of our C++ code: token ids from the npm gpt-3-encoder (GPT-2, via gpt2_encode.js), spm_encode
(SentencePiece) or Python int() (NullTokenizer); documents assembled as Megatron's
preprocess_data.py Encoder.encode does; files written by
tests/datasets/reference/indexed_dataset_reference.py:write_dataset (the .idx/.bin layout of
megatron_facts.md). kjv_expected.txt holds sizes and CRC-32s for data/corpus/kjv.jsonl.gz.

    (cd /tmp/npmref && npm install gpt-3-encoder@1.1.4)
    NODE_PATH=/tmp/npmref/node_modules python3 tests/tools/reference/make_preprocess_reference.py
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(ROOT, "tests", "tools", "data")
sys.path.insert(0, os.path.join(ROOT, "tests", "datasets", "reference"))
from indexed_dataset_reference import write_dataset  # noqa: E402

GPT2_EOD = 50256
UINT16, INT32 = 8, 4


def gpt2_encode(texts):
    out = subprocess.run(["node", os.path.join(HERE, "gpt2_encode.js")], input=json.dumps(texts),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def spm_encode(texts, model):
    out = subprocess.run(["spm_encode", "--model=" + model, "--output_format=id"],
                         input="\n".join(texts) + "\n", capture_output=True, text=True, check=True)
    return [[int(x) for x in line.split()] for line in out.stdout.split("\n")[:len(texts)]]


def encode_doc(value, ids_of, eod, append_eod):
    """Megatron's Encoder.encode for one key: the document as a list of sequences."""
    sentences = value if isinstance(value, list) else [value]
    seqs = [list(ids_of[s]) for s in sentences if ids_of[s]]
    if seqs and append_eod:
        seqs[-1].append(eod)
    return seqs


def write_lines(path, lines):
    with open(path, "wb") as f:
        f.write(b"".join(lines))


def make_inputs():
    with gzip.open(os.path.join(ROOT, "data/corpus/kjv.jsonl.gz"), "rt", encoding="utf-8") as f:
        chapters = [json.loads(line) for line in f]
    lines = []
    for ch in chapters[:30]:
        doc = {"id": ch["id"], "title": ch["title"], "text": ch["text"][:500]}
        lines.append(json.dumps(doc, ensure_ascii=False).encode("utf-8") + b"\n")
    specials = [
        {"id": 100, "title": "Empty", "text": ""},
        {"id": 101, "title": "Unicode \u2713", "text": "caf\u00e9 \u4e2d\u6587 \U0001F600 na\u00efve\n\ttabs  and   spaces"},
        {"id": 102, "title": "Sentences", "text": ["First sentence.", "", "Second one!", " Third"]},
        {"id": 103, "title": "", "text": "   "},
        {"text": "keys in another order", "other": [1, 2, {"x": None}], "title": "T"},
    ]
    for doc in specials:
        lines.append(json.dumps(doc, ensure_ascii=False).encode("utf-8") + b"\n")
    escaped = {"id": 104, "title": "Escapes", "text": "quote \" backslash \\ \u00e9 \U0001F600 \u0085 \ufeff"}
    lines.append(json.dumps(escaped, ensure_ascii=True).encode("ascii") + b"\r\n")  # CRLF
    lines.append(b'{"id": 105, "title": "Last", "text": "no newline at the end"}')
    write_lines(os.path.join(DATA, "small.jsonl"), lines)
    with open(os.path.join(DATA, "small.jsonl"), "rb") as f:
        raw = f.read()
    with open(os.path.join(DATA, "small.jsonl.gz"), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
            gz.write(raw)

    bad = [
        b'{"text": "good line one"}\n',                 # 1
        b'{"text": "good line two"}\n',                 # 2
        b'{"text": "unterminated\n',                    # 3 invalid JSON
        b'{"text": "good line four"}\n',                # 4
        b'{"title": "no text key"}\n',                  # 5 missing key
        b'{"text": 42}\n',                              # 6 not a string
        b'\n',                                          # 7 empty line
        b'[1, 2, 3]\n',                                 # 8 not an object
        b'{"text": ["ok", 5]}\n',                       # 9 list with a number
        b'{"text": "bad utf8 \xff here"}\n',            # 10 ill-formed UTF-8
        b'{"text": "lone \\ud800 surrogate"}\n',        # 11 lone surrogate escape
        b'{"text": "good line twelve"}\n',              # 12
        b'{"text": "x"} trailing\n',                    # 13 trailing garbage
        b'{"text": "good line fourteen"}',              # 14 (no final newline)
    ]
    write_lines(os.path.join(DATA, "bad.jsonl"), bad)

    null_docs = ["1 2 3", "65535 0 7", "69999", "100 200 300 400", "5"]
    write_lines(os.path.join(DATA, "null.jsonl"),
                [json.dumps({"text": t}).encode() + b"\n" for t in null_docs])

    spm_texts = []
    for ch in chapters[400:412]:
        spm_texts.append(ch["text"].replace("\n", " ")[:300])
    write_lines(os.path.join(DATA, "spm.jsonl"),
                [json.dumps({"text": t}).encode() + b"\n" for t in spm_texts])


def read_jsonl(path):
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().split(b"\n") if line.strip()]


def gpt2_datasets(docs, keys, append_eod):
    texts = sorted({s for d in docs for k in keys
                    for s in (d[k] if isinstance(d[k], list) else [d[k]])})
    ids_of = dict(zip(texts, gpt2_encode(texts)))
    return {k: [encode_doc(d[k], ids_of, GPT2_EOD, append_eod) for d in docs] for k in keys}


def main():
    make_inputs()
    out = lambda name: os.path.join(HERE, name)  # noqa: E731

    small = read_jsonl(os.path.join(DATA, "small.jsonl"))
    for key, docs in gpt2_datasets(small, ["text", "title"], True).items():
        write_dataset(out("small_%s_document" % key), UINT16, docs)
    write_dataset(out("small_noeod_text_document"), UINT16,
                  gpt2_datasets(small, ["text"], False)["text"])
    # --partitions 3: line i goes to partition i % 3; partitions are concatenated.
    order = [i for p in range(3) for i in range(len(small)) if i % 3 == p]
    docs = gpt2_datasets(small, ["text"], True)["text"]
    write_dataset(out("small_p3_text_document"), UINT16, [docs[i] for i in order])

    good = [json.loads(l) for l in [b'{"text": "good line one"}', b'{"text": "good line two"}',
                                    b'{"text": "good line four"}', b'{"text": "good line twelve"}',
                                    b'{"text": "good line fourteen"}']]
    write_dataset(out("bad_skip_text_document"), UINT16, gpt2_datasets(good, ["text"], True)["text"])

    null = read_jsonl(os.path.join(DATA, "null.jsonl"))
    null_docs = [[[int(x) for x in d["text"].split(" ")] + [70000]] for d in null]
    write_dataset(out("null_text_document"), INT32, null_docs)  # --vocab-size 70000

    spm = read_jsonl(os.path.join(DATA, "spm.jsonl"))
    model = os.path.join(ROOT, "tests/tokenizer/reference/spm_bpe.model")
    ids = spm_encode([d["text"] for d in spm], model)
    write_dataset(out("spm_llama2_text_document"), UINT16, [[[1] + t + [2]] for t in ids])

    # The whole KJV corpus (GPT-2, --append-eod): sizes and CRC-32 of the two files.
    with gzip.open(os.path.join(ROOT, "data/corpus/kjv.jsonl.gz"), "rb") as f:
        kjv = [json.loads(line) for line in f.read().split(b"\n") if line.strip()]
    kjv_docs = gpt2_datasets(kjv, ["text"], True)["text"]
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "kjv_text_document")
        write_dataset(prefix, UINT16, kjv_docs)
        with open(out("kjv_expected.txt"), "w") as f:
            for ext in ("bin", "idx"):
                with open(prefix + "." + ext, "rb") as g:
                    blob = g.read()
                f.write("%s %d %08x\n" % (ext, len(blob), zlib.crc32(blob)))
    print("wrote the preprocess_data test inputs and references")


if __name__ == "__main__":
    main()

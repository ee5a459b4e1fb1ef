#!/usr/bin/env python3
"""Independent writer of Megatron indexed datasets (.idx/.bin) for the C++ tests.

Follows the layout in megatron_facts.md section 1 (Megatron's _IndexWriter /
IndexedDatasetBuilder) using only the struct module, and writes next to this script:

  indexed_corpus.txt           the datasets as documents -> sequences -> token values:
                                 dataset <name> <dtype code> <multimodal 0|1> [merged from...]
                                 doc
                                 seq <mode> <token> <token> ...
  indexed_<name>.bin / .idx    one dataset per entry of indexed_corpus.txt

.idx: b"MMIDIDX\\x00\\x00", u64 version 1, u8 dtype code, u64 sequence count N, u64 document
count D (entries of the document index, leading 0 included), i32[N] lengths, i64[N] byte
pointers into .bin, i64[D] document indices, then i8[N] modes for multimodal datasets.
.bin: the tokens, little-endian, in the dtype.

    python3 tests/datasets/reference/indexed_dataset_reference.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# code: (struct format, itemsize, min, max)
DTYPES = {
    1: ("B", 1, 0, 255),                       # uint8
    2: ("b", 1, -128, 127),                    # int8
    3: ("h", 2, -32768, 32767),                # int16
    4: ("i", 4, -2**31, 2**31 - 1),            # int32
    5: ("q", 8, -2**63, 2**63 - 1),            # int64
    6: ("d", 8, -2**53, 2**53),                # float64 (integral values)
    7: ("f", 4, -2**24, 2**24),                # float32 (integral values)
    8: ("H", 2, 0, 65535),                     # uint16
}


class Lcg:
    """Deterministic 64-bit LCG (Knuth MMIX constants)."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % 2**64
        return self.state >> 33

    def below(self, n):
        return self.next() % n


def make_documents(rng, code, num_docs):
    _, _, lo, hi = DTYPES[code]
    extremes = [lo, hi, 0, 1, 50256 if hi >= 50256 else hi - 1]
    docs = []
    for d in range(num_docs):
        if d == 3:
            docs.append([])  # a document without sequences
            continue
        seqs = []
        for s in range(1 + rng.below(4)):
            if d == 5 and s == 0:
                seqs.append([])  # an empty sequence
                continue
            length = 1 + rng.below(12)
            seq = []
            for _ in range(length):
                if rng.below(8) == 0:
                    seq.append(extremes[rng.below(len(extremes))])
                else:
                    seq.append(lo + rng.below(min(hi - lo + 1, 2**31)))
            seqs.append(seq)
        docs.append(seqs)
    return docs


def write_dataset(prefix, code, docs, modes=None):
    fmt, itemsize, _, _ = DTYPES[code]
    lengths, pointers, doc_index = [], [], [0]
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            for seq in doc:
                pointers.append(sum(lengths) * itemsize)
                lengths.append(len(seq))
                f.write(struct.pack("<%d%s" % (len(seq), fmt), *seq))
            doc_index.append(len(lengths))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(doc_index)))
        f.write(struct.pack("<%di" % len(lengths), *lengths))
        f.write(struct.pack("<%dq" % len(pointers), *pointers))
        f.write(struct.pack("<%dq" % len(doc_index), *doc_index))
        if modes is not None:
            flat = [m for doc in modes for m in doc]
            f.write(struct.pack("<%db" % len(flat), *flat))


def main():
    rng = Lcg(1234)
    corpus = []
    for name, code in [("u8", 1), ("i8", 2), ("i16", 3), ("i32", 4), ("i64", 5), ("f64", 6),
                       ("f32", 7), ("u16", 8)]:
        corpus.append({"name": name, "dtype_code": code, "documents": make_documents(rng, code, 12)})
    corpus.append({"name": "u16b", "dtype_code": 8, "documents": make_documents(rng, 8, 5)})
    corpus.append({"name": "empty", "dtype_code": 8, "documents": []})
    mm_docs = make_documents(rng, 8, 6)
    mm_modes = [[rng.below(3) for _ in doc] for doc in mm_docs]
    corpus.append({"name": "mm", "dtype_code": 8, "documents": mm_docs, "modes": mm_modes})
    # add_index("u16") then add_index("u16b"): the documents simply concatenate.
    by_name = {c["name"]: c for c in corpus}
    corpus.append({"name": "merged", "dtype_code": 8,
                   "documents": by_name["u16"]["documents"] + by_name["u16b"]["documents"],
                   "merged_from": ["u16", "u16b"]})

    for entry in corpus:
        write_dataset(os.path.join(HERE, "indexed_" + entry["name"]), entry["dtype_code"],
                      entry["documents"], entry.get("modes"))
    with open(os.path.join(HERE, "indexed_corpus.txt"), "w") as f:
        for entry in corpus:
            header = ["dataset", entry["name"], str(entry["dtype_code"]),
                      "1" if "modes" in entry else "0"] + entry.get("merged_from", [])
            f.write(" ".join(header) + "\n")
            for d, doc in enumerate(entry["documents"]):
                f.write("doc\n")
                for s, seq in enumerate(doc):
                    mode = entry["modes"][d][s] if "modes" in entry else 0
                    f.write(" ".join(["seq", str(mode)] + [repr(v) for v in seq]) + "\n")
    print("wrote %d datasets to %s" % (len(corpus), HERE))


if __name__ == "__main__":
    main()

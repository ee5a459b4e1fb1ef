#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.inc: the code-point classes used by the GPT-2
pre-tokenisation pattern  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

Each code point is a letter (\\p{L}), a number (\\p{N}), whitespace (\\s) or other. The three sets
are disjoint; the output is one sorted table of inclusive ranges [first, last] with their class.

Sources (--source):
  regex        (default) the third-party `regex` module, which Megatron's gpt2_tokenization.py
               uses. This is what "byte for byte as in Megatron" means. Its \\s is the Unicode
               White_Space property (includes U+0085, excludes U+FEFF).
  unicodedata  Python's own tables (general category L*/N*, str.isspace()). Python 3.11 ships
               Unicode 14, older than Node 20's and regex's, and str.isspace() adds U+001C..U+001F,
               so this source disagrees with Megatron on a few thousand code points; it exists for
               environments without `regex`.

With the classes it writes src/tokenizer/unicode_word_tables.inc (--word-out): the code points of
the Rust regex crate's \\w (UTS #18 Annex C: Alphabetic, general category Mark, Decimal_Number,
Connector_Punctuation, Join_Control), which the tokenizers library tests around single_word
added tokens. From `regex` as [\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}] (the same set
as its own \\w); from unicodedata Alphabetic is approximated by L and Nl, missing the few
Other_Alphabetic symbols such as the circled letters U+24B6..U+24E9.
Run the classes with the interpreter that has `regex` (the committed tables name its version
in their first line) and --tables classes, so that an older Python does not rewrite the NFC
tables with its older Unicode.

It also generates src/tokenizer/unicode_nfc_tables.inc (--tables nfc): the Unicode data of NFC
normalisation (the Hugging Face tokenizer.json normalizer "NFC", unicode_normalization.cpp),
always from Python's unicodedata: canonical combining classes, full canonical decompositions
(NFD of one code point; Hangul syllables are algorithmic and left out) and the primary
composites (pairs that canonical composition joins: a two-code-point canonical decomposition
whose character is not composition-excluded). Run it with the newest Python at hand (3.13 has
Unicode 15.1; 3.11 has 14.0).

Usage:  python3 src/tokenizer/gen_unicode_tables.py [--tables classes|nfc|all]
            [--source regex|unicodedata] [--out PATH] [--word-out PATH] [--nfc-out PATH]
"""
import argparse
import os
import sys
import unicodedata

LETTER, NUMBER, SPACE = 1, 2, 3
NAMES = {LETTER: "kLetter", NUMBER: "kNumber", SPACE: "kSpace"}


def classify_regex():
    import regex  # noqa: F401  (pip install regex)

    letter = regex.compile(r"\p{L}")
    number = regex.compile(r"\p{N}")
    space = regex.compile(r"\s")
    word = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")

    def cls(ch):
        if letter.match(ch):
            return LETTER
        if number.match(ch):
            return NUMBER
        if space.match(ch):
            return SPACE
        return 0

    def is_word(ch):
        return word.match(ch) is not None

    return cls, is_word, "regex " + regex.__version__


def classify_unicodedata():
    def cls(ch):
        cat = unicodedata.category(ch)
        if cat[0] == "L":
            return LETTER
        if cat[0] == "N":
            return NUMBER
        if ch.isspace():
            return SPACE
        return 0

    def is_word(ch):
        cat = unicodedata.category(ch)
        return cat[0] in "LM" or cat in ("Nl", "Nd", "Pc") or ch in "\u200c\u200d"

    return cls, is_word, "unicodedata (Unicode %s)" % unicodedata.unidata_version


def write_nfc_tables(path):
    def ccc(cp):
        return unicodedata.combining(chr(cp))

    ccc_ranges = []  # [first, last, class] for class != 0
    decompositions = []  # (cp, [code points of NFD(cp)])
    compositions = []  # (first, second, composite)
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or 0xAC00 <= cp <= 0xD7A3:
            continue  # surrogates never occur; Hangul syllables are algorithmic
        c = ccc(cp)
        if c:
            if ccc_ranges and ccc_ranges[-1][2] == c and ccc_ranges[-1][1] == cp - 1:
                ccc_ranges[-1][1] = cp
            else:
                ccc_ranges.append([cp, cp, c])
        ch = chr(cp)
        nfd = unicodedata.normalize("NFD", ch)
        if nfd != ch:
            assert len(nfd) <= 4, hex(cp)
            decompositions.append((cp, [ord(x) for x in nfd]))
        mapping = unicodedata.decomposition(ch)
        if mapping and not mapping.startswith("<"):
            parts = [int(x, 16) for x in mapping.split()]
            # A primary composite: NFC keeps it (it is not composition-excluded).
            if len(parts) == 2 and unicodedata.normalize("NFC", ch) == ch:
                compositions.append((parts[0], parts[1], cp))
    compositions.sort()
    lines = [
        "// Generated by src/tokenizer/gen_unicode_tables.py --tables nfc from Python unicodedata "
        "(Unicode %s). Do not edit." % unicodedata.unidata_version,
        "// NFC data for unicode_normalization.cpp: %d combining-class ranges, %d canonical "
        "decompositions, %d primary composites." % (len(ccc_ranges), len(decompositions), len(compositions)),
        "#ifdef MS_NFC_COMBINING_CLASSES  // {first, last, canonical combining class}",
    ]
    for i in range(0, len(ccc_ranges), 4):
        lines.append(" ".join("{0x%04X, 0x%04X, %d}," % tuple(r) for r in ccc_ranges[i:i + 4]))
    lines.append("#endif")
    lines.append("#ifdef MS_NFC_DECOMPOSITIONS  // {code point, length, {NFD of it}}, sorted")
    for cp, parts in decompositions:
        padded = parts + [0] * (4 - len(parts))
        lines.append("{0x%04X, %d, {%s}}," % (cp, len(parts), ", ".join("0x%04X" % p for p in padded)))
    lines.append("#endif")
    lines.append("#ifdef MS_NFC_COMPOSITIONS  // {first, second, composite}, sorted by (first, second)")
    for i in range(0, len(compositions), 3):
        lines.append(" ".join("{0x%04X, 0x%04X, 0x%04X}," % c for c in compositions[i:i + 3]))
    lines.append("#endif")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d ccc ranges, %d decompositions, %d compositions (Unicode %s)" % (
        path, len(ccc_ranges), len(decompositions), len(compositions), unicodedata.unidata_version))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", choices=["classes", "nfc", "all"], default="all")
    parser.add_argument("--source", choices=["regex", "unicodedata"], default="regex")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "unicode_tables.inc"))
    parser.add_argument("--word-out", default=os.path.join(os.path.dirname(__file__), "unicode_word_tables.inc"))
    parser.add_argument("--nfc-out", default=os.path.join(os.path.dirname(__file__), "unicode_nfc_tables.inc"))
    args = parser.parse_args()
    if args.tables in ("nfc", "all"):
        write_nfc_tables(args.nfc_out)
    if args.tables == "nfc":
        return
    try:
        cls, is_word, source = classify_regex() if args.source == "regex" else classify_unicodedata()
    except ImportError:
        sys.exit("the `regex` module is missing: pip install regex, or pass --source unicodedata")

    ranges = []  # [first, last, class]
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates never reach the classifier (UTF-8 input is validated)
        c = cls(chr(cp))
        if c == 0:
            continue
        if ranges and ranges[-1][2] == c and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, c])

    counts = {k: sum(r[1] - r[0] + 1 for r in ranges if r[2] == k) for k in NAMES}
    lines = [
        "// Generated by src/tokenizer/gen_unicode_tables.py from %s. Do not edit." % source,
        "// Code-point classes of the GPT-2 pre-tokenisation pattern: %d letters (\\p{L}), "
        "%d numbers (\\p{N}), %d whitespace (\\s)," % (counts[LETTER], counts[NUMBER], counts[SPACE]),
        "// as %d sorted, disjoint, inclusive ranges {first, last, class}." % len(ranges),
    ]
    for i in range(0, len(ranges), 3):
        chunk = ranges[i:i + 3]
        lines.append(" ".join("{0x%04X, 0x%04X, CharClass::%s}," % (a, b, NAMES[c]) for a, b, c in chunk))
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d ranges (%s)" % (args.out, len(ranges), source))
    write_word_table(args.word_out, is_word, source)


def write_word_table(path, is_word, source):
    ranges = []  # [first, last]
    count = 0
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or not is_word(chr(cp)):
            continue
        count += 1
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    lines = [
        "// Generated by src/tokenizer/gen_unicode_tables.py from %s. Do not edit." % source,
        "// The Rust regex crate's \\w (Alphabetic, Mark, Decimal_Number, Connector_Punctuation, "
        "Join_Control): %d code points" % count,
        "// as %d sorted, disjoint, inclusive ranges {first, last}." % len(ranges),
    ]
    for i in range(0, len(ranges), 5):
        lines.append(" ".join("{0x%04X, 0x%04X}," % tuple(r) for r in ranges[i:i + 5]))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d ranges, %d code points (%s)" % (path, len(ranges), count, source))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compares the numbers two pretrain_gpt logs print (scripts/gpu_check.sh's training checks).

    gpu_check_compare.py [--skip-want N] NAME WANT.log GOT.log REL_TOL [FIELD]

FIELD is the log field to compare, "lm loss" by default (the iteration lines' values; the
validation lines are left out). --skip-want N drops WANT's first N values (a resumed run against
the uninterrupted one). Prints one line, "PASS NAME ..." or "FAIL NAME ...", with the
largest relative difference and the values at it; REL_TOL 0 asks for identical text. Exit code:
0 pass, 1 fail (also when a log has no such numbers or the counts differ).
"""
import re
import sys


def logged(path, field):
    values = []
    try:
        f = open(path, errors="replace")
    except OSError:
        return values  # a run that never started: no numbers, so the comparison fails
    with f:
        for line in f:
            if " iteration " not in line or "validation" in line:
                continue
            m = re.search(re.escape(field) + r": ([0-9.E+-]+)", line)
            if m:
                values.append(m.group(1))
    return values


def main():
    args, skip = sys.argv[1:], 0
    if args[:1] == ["--skip-want"] and len(args) > 1:
        skip, args = int(args[1]), args[2:]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    name, want_path, got_path, tol = args[0], args[1], args[2], float(args[3])
    field = args[4] if len(args) == 5 else "lm loss"
    want, got = logged(want_path, field)[skip:], logged(got_path, field)
    if not want or len(want) != len(got):
        print(f"FAIL {name}: {len(want)} vs {len(got)} '{field}' values ({want_path}, {got_path})")
        return 1
    if tol == 0:
        same = want == got
        print(f"{'PASS' if same else 'FAIL'} {name}: {len(want)} '{field}' values {'identical' if same else 'differ'}"
              f" (first {want[0]} vs {got[0]}, last {want[-1]} vs {got[-1]})")
        return 0 if same else 1
    worst, at = 0.0, 0
    for i, (a, b) in enumerate(zip(want, got)):
        a, b = float(a), float(b)
        rel = abs(a - b) / max(abs(a), 1e-30)
        if rel > worst or rel != rel:
            worst, at = rel, i
    ok = worst <= tol
    print(f"{'PASS' if ok else 'FAIL'} {name}: max relative difference {worst:.2e} (tolerance {tol:.0e}) at step"
          f" {at + 1} of {len(want)}: {want[at]} vs {got[at]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

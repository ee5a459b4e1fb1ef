#!/usr/bin/env python3
"""How much of a group's communication ran under GEMMs, from --profile traces (level1 or up).

Reads the Chrome traces pretrain_gpt --profile writes (one per rank) and, per rank, measures:
  comm    the time the group's collectives occupied its communication thread (the union of their
          slices): what they would cost a step if nothing overlapped them;
  hidden  the part of it during which the rank's main thread ran a GEMM kernel (linear_forward,
          linear_backward_input, linear_backward_weight): communication under GEMM slices;
  exposed comm - hidden.
Times are milliseconds per profiled step (the trace's "step" slices). Standard library only.

  bench/trace_overlap.py [--group tp] profile_dir/rank_*.trace.json
"""
import argparse
import json
import sys

GEMMS = {"linear_forward", "linear_backward_input", "linear_backward_weight"}


def union(intervals):
    """Sorted, disjoint union of [start, end) intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(intervals):
    return sum(end - start for start, end in intervals)


def intersection(a, b):
    """Length of the intersection of two disjoint sorted interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def measure(path, group):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    main = {tid for tid, name in threads.items() if name == "main"}
    gemms, comm, steps, open_begins = [], [], 0, {}
    for e in events:
        ph, cat = e.get("ph"), e.get("cat")
        if cat == "step" and ph in ("X", "B"):
            steps += 1
        if cat == "kernel" and e.get("tid") in main and e.get("name") in GEMMS:
            if ph == "X":
                gemms.append((e["ts"], e["ts"] + e["dur"]))
            elif ph == "B":
                open_begins.setdefault(e["tid"], []).append(e["ts"])
        if cat == "kernel" and ph == "E" and e.get("tid") in main and e.get("name") in GEMMS:
            stack = open_begins.get(e["tid"])
            if stack:
                gemms.append((stack.pop(), e["ts"]))
        if cat == "comm" and ph == "X" and e.get("args", {}).get("group") == group and e.get("tid") not in main:
            comm.append((e["ts"], e["ts"] + e["dur"]))
    comm_u, gemm_u = union(comm), union(gemms)
    steps = max(steps, 1)
    total_ms = length(comm_u) / 1000.0 / steps
    hidden_ms = intersection(comm_u, gemm_u) / 1000.0 / steps
    return {"trace": path, "steps": steps, "collectives": len(comm), "comm_ms": total_ms, "hidden_ms": hidden_ms,
            "exposed_ms": total_ms - hidden_ms}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", default="tp", help="process group whose collectives are measured (default tp)")
    parser.add_argument("--json", action="store_true", help="one JSON object per trace instead of a table")
    parser.add_argument("--cells", action="store_true",
                        help="per trace, only the table cells: collectives | comm | under GEMMs | exposed")
    parser.add_argument("traces", nargs="+")
    args = parser.parse_args()
    rows = [measure(path, args.group) for path in args.traces]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    if args.cells:
        for r in rows:
            print(f"{r['collectives'] / r['steps']:.0f} | {r['comm_ms']:.1f} | {r['hidden_ms']:.1f} | "
                  f"{r['exposed_ms']:.1f}")
        return 0
    print("| trace | collectives/step | comm ms/step | under GEMMs ms/step | exposed ms/step |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['trace']} | {r['collectives'] / r['steps']:.0f} | {r['comm_ms']:.1f} | {r['hidden_ms']:.1f} "
              f"({100 * r['hidden_ms'] / max(r['comm_ms'], 1e-9):.0f} %) | {r['exposed_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

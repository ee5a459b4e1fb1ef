#!/usr/bin/env python3
"""Auto-settings choices against the grid's fastest layouts, re-measured interleaved
(bench/README.md "Auto settings"): the first plan of each search's plan JSON (white, mixed,
black, from fresh profiles) and the grid's N fastest layouts by their single grid run, each run
once per round, in turn, for --rounds rounds; per layout the median step and the spread of its
rounds, and each choice's excess over the fastest median. The grid's fastest come from a grid
plan JSON (--grid, a black search of every layout) or from the table of a recorded grid report
(--grid-report, rows sorted by the measured step, as bench/auto_settings_report.py prints them).
A layout's command line is taken from the first plan JSON, which lists every fitting layout.

  auto_settings_choices.py PLAN.json [PLAN.json ...] (--grid GRID.json | --grid-report REPORT.md)
                           [--top N] [--rounds N] [--iters N] --pretrain PATH
"""
import argparse
import json
import statistics
import sys

from auto_settings_report import interleaved


def grid_fastest(args):
    if args.grid:
        grid = json.load(open(args.grid))
        rows = [p for p in grid["plans"] if "measured" in p]
        rows.sort(key=lambda p: p["measured"]["step_seconds"])
        return [p["name"] for p in rows[:args.top]]
    names = []
    for line in open(args.grid_report):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| TP") and len(cells) == 8:
            names.append(cells[0])
    return names[:args.top]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plans", nargs="+")
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--grid")
    source.add_argument("--grid-report")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--pretrain", required=True)
    args = ap.parse_args()
    plans = [json.load(open(p)) for p in args.plans]
    every = {p["name"]: p for p in plans[0]["plans"]}
    chosen_by = {}
    for path, plan in zip(args.plans, plans):
        chosen_by.setdefault(plan["plans"][0]["name"], []).append("%s (%s)" % (path, plan["type"]))
    fastest = grid_fastest(args)
    for i, name in enumerate(fastest):
        chosen_by.setdefault(name, []).append("grid's #%d" % (i + 1))
    missing = [n for n in chosen_by if n not in every]
    if missing:
        sys.exit("not in %s: %s" % (args.plans[0], "; ".join(missing)))
    layouts = [every[n] for n in chosen_by]
    times = interleaved(args.pretrain, plans[0]["world_size"], layouts, args.rounds, args.iters)
    medians = {n: statistics.median(t) for n, t in times.items()}
    best = min(medians.values())
    print("| layout | chosen by | median step (s), %d rounds | spread of the rounds | over the fastest |"
          % args.rounds)
    print("|---|---|---:|---:|---:|")
    for name in sorted(medians, key=medians.get):
        t = times[name]
        print("| %s | %s | %.4f | %.0f%% | %+.1f%% |" % (
            name, "; ".join(chosen_by[name]), medians[name], 100 * (max(t) - min(t)) / medians[name],
            100 * (medians[name] - best) / best))
    for path, plan in zip(args.plans, plans):
        name = plan["plans"][0]["name"]
        print("%s (%s, search %.0f s, profiling %.0f s): %s %+.1f%%" % (
            path, plan["type"], plan["search_seconds"], plan["profiling_seconds"], name,
            100 * (medians[name] - best) / best))


if __name__ == "__main__":
    sys.exit(main())

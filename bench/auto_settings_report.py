#!/usr/bin/env python3
"""Auto-settings evidence (bench/run_auto_settings_bench.sh): joins the white box's plan JSON
(a prediction for every layout) with the grid's (a black-box search that ran every layout) by
layout, and prints per layout the prediction beside the measurement (memory per pipeline stage
against the run's exact peak, step time against the median iteration), the error counts against
the issue's bounds, the white box's choice against the grid's measured best (re-measured
interleaved, medians of --rounds), and the search's time against the grid's. With
--accuracy-rounds, twelve layouts (a mix of TP, SP, PP, VPP, CP ring/Ulysses/hybrid, recompute
and the distributed optimizer) re-measured interleaved: the step prediction against the median
of the rounds and their spread (the grid's single runs spread by tens of percent), the memory
prediction against the exact peaks.

  auto_settings_report.py WHITE.json --grid GRID.json [--rounds N] [--accuracy-rounds N]
                          [--pretrain PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def measured_stage_peak(plan, pp_rank):
    return max(r["total_peak_bytes"] for r in plan["measured"]["ranks"] if r["pp_rank"] == pp_rank)


def rerun(pretrain, ranks, args, work):
    """One run with the report on; the median iteration after the first, slowest rank."""
    prefix = os.path.join(work, "rerun")
    for r in range(ranks):
        try:
            os.remove("%s.rank%d.json" % (prefix, r))
        except FileNotFoundError:
            pass
    env = dict(os.environ, MINDSPEED_AUTO_SETTINGS_REPORT=prefix, OMP_WAIT_POLICY="PASSIVE")
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", "-x",
           "MINDSPEED_AUTO_SETTINGS_REPORT"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    subprocess.run(cmd + [pretrain] + args, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    reports = [json.load(open("%s.rank%d.json" % (prefix, r))) for r in range(ranks)]
    steps = [max(rep["iteration_seconds"][i] for rep in reports)
             for i in range(1, len(reports[0]["iteration_seconds"]))]
    return statistics.median(steps)


ACCURACY_LAYOUTS = [
    "TP1 PP1 CP1 DP4 mbs2 recompute=none",
    "TP1 PP1 CP1 DP4 mbs1 recompute=full distopt",
    "TP2+SP PP1 CP1 DP2 mbs2 recompute=selective",
    "TP4 PP1 CP1 DP1 mbs4 recompute=none",
    "TP1 PP2 CP1 DP2 mbs1 recompute=none distopt",
    "TP1 PP4 CP1 DP1 mbs2 recompute=none",
    "TP1 PP2 VPP2 CP1 DP2 mbs1 recompute=none",
    "TP2 PP2 CP1 DP1 mbs2 recompute=full",
    "TP1 PP1 CP2(ring) DP2 mbs2 recompute=none",
    "TP1 PP1 CP2(ulysses) DP2 mbs1 recompute=none distopt",
    "TP1 PP1 CP4(hybrid u2) DP1 mbs2 recompute=none",
    "TP2+SP PP2 VPP2 CP1 DP1 mbs4 recompute=selective",
]


def run_args(plan, iters):
    return list(plan["args"]) + ["--train-iters", str(iters), "--log-interval", str(iters), "--eval-iters", "0"]


def interleaved(pretrain, world, plans, rounds, iters):
    """Median step of each plan over `rounds` rounds that run every plan once, in turn."""
    times = {p["name"]: [] for p in plans}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(rounds):
            for p in plans:
                times[p["name"]].append(rerun(pretrain, world, run_args(p, iters), work))
    return times


def worst_memory_error(p):
    worst = None
    for st in p["memory"]["stages"]:
        peak = measured_stage_peak(p, st["pp_rank"])
        err = (st["total_bytes"] - peak) / peak
        if worst is None or abs(err) > abs(worst[2]):
            worst = (st["total_bytes"], peak, err)
    return worst


def accuracy(rows, pretrain, world, rounds, iters):
    by_name = {r["name"]: r for r in rows}
    plans = [by_name[n] for n in ACCURACY_LAYOUTS]
    times = interleaved(pretrain, world, plans, rounds, iters)
    print()
    print("| layout (re-measured interleaved, %d rounds) | memory model (MiB) | exact peak (MiB) | error | "
          "step model (s) | median step (s) | error | spread of the rounds |" % rounds)
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    mem_ok = time_ok = 0
    for p in plans:
        mem = worst_memory_error(p)
        t = times[p["name"]]
        med = statistics.median(t)
        err = (p["step_seconds"]["total"] - med) / med
        mem_ok += abs(mem[2]) <= 0.05
        time_ok += abs(err) <= 0.15
        print("| %s | %.2f | %.2f | %+.1f%% | %.4f | %.4f | %+.1f%% | %.0f%% |" % (
            p["name"], mem[0] / 2**20, mem[1] / 2**20, 100 * mem[2], p["step_seconds"]["total"], med,
            100 * err, 100 * (max(t) - min(t)) / med))
    print("memory within 5%%: %d of %d; step within 15%%: %d of %d" % (mem_ok, len(plans), time_ok, len(plans)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--grid", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pretrain", default="")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--accuracy-rounds", type=int, default=0)
    args = ap.parse_args()
    plan = json.load(open(args.plan))
    grid = json.load(open(args.grid))
    measured = {p["name"]: p["measured"] for p in grid["plans"] if "measured" in p}
    rows = []
    for p in plan["plans"]:
        if p["name"] in measured:
            rows.append(dict(p, measured=measured[p["name"]]))
    print("| layout | memory model (MiB) | measured peak (MiB) | error | step model (s) | step measured (s) | "
          "error | iteration spread |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    mem_errors, time_errors = [], []
    for p in sorted(rows, key=lambda q: q["measured"]["step_seconds"]):
        worst = worst_memory_error(p)
        mem_errors.append(worst[2])
        t_err = (p["step_seconds"]["total"] - p["measured"]["step_seconds"]) / p["measured"]["step_seconds"]
        time_errors.append(t_err)
        print("| %s | %.2f | %.2f | %+.1f%% | %.4f | %.4f | %+.1f%% | %.0f%% |" % (
            p["name"], worst[0] / 2**20, worst[1] / 2**20, 100 * worst[2], p["step_seconds"]["total"],
            p["measured"]["step_seconds"], 100 * t_err, 100 * p["measured"]["spread"]))
    n = len(rows)
    spreads = [p["measured"]["spread"] for p in rows]
    print()
    print("layouts measured: %d of %d legal (%d fit the memory cap)" % (n, plan["legal"], plan["fitting"]))
    print("memory within 5%%: %d of %d (median |error| %.1f%%, worst %+.1f%%)" % (
        sum(abs(e) <= 0.05 for e in mem_errors), n, 100 * statistics.median(map(abs, mem_errors)),
        100 * max(mem_errors, key=abs)))
    print("step time within 15%%: %d of %d (median |error| %.1f%%); iteration spread median %.0f%%, max %.0f%%" % (
        sum(abs(e) <= 0.15 for e in time_errors), n, 100 * statistics.median(map(abs, time_errors)),
        100 * statistics.median(spreads), 100 * max(spreads)))
    grid_seconds = sum(p["measured"]["wall_seconds"] for p in rows)
    print("search (white box, profiling %.0f s included): %.0f s; grid (every layout run once): %.0f s (%.0f%%)" % (
        plan["profiling_seconds"], plan["search_seconds"], grid_seconds, 100 * plan["search_seconds"] / grid_seconds))
    # The white box's choice (its first plan) against the grid's measured best, re-measured
    # interleaved.
    chosen = next(r for r in rows if r["name"] == plan["plans"][0]["name"])
    best = sorted(rows, key=lambda q: q["measured"]["step_seconds"])[:3]
    print("white box's choice: %s (grid rank %d by single measurement)" % (
        chosen["name"], 1 + sorted(rows, key=lambda q: q["measured"]["step_seconds"]).index(chosen)))
    if not args.pretrain:
        return
    contenders = [chosen] + [b for b in best if b is not chosen]
    times = interleaved(args.pretrain, plan["world_size"], contenders, args.rounds, args.iters)
    medians = {k: statistics.median(v) for k, v in times.items()}
    fastest = min(medians.values())
    print("re-measured interleaved, %d rounds (median step s): " % args.rounds +
          "; ".join("%s %.4f" % (k, v) for k, v in medians.items()))
    print("chosen vs best: %+.1f%%" % (100 * (medians[chosen["name"]] - fastest) / fastest))
    if args.accuracy_rounds > 0:
        accuracy(rows, args.pretrain, plan["world_size"], args.accuracy_rounds, args.iters)


if __name__ == "__main__":
    sys.exit(main())

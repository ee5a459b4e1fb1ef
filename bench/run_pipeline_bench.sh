#!/usr/bin/env bash
# Pipeline-schedule benchmark: the same small LLaMA-style GPT (8 layers, 8 micro-batches per
# step) trained with no pipelining on 1 rank, then with 1F1B, interleaved 1F1B (vpp 2),
# DualPipeV and DualPipeV with --dualpipev-dw-detach on 2 and 4 ranks (pure pipeline, one
# thread per rank). Prints each run's per-rank table (bench/pipeline_schedules.cpp) and a
# Markdown summary table at the end. Builds build/release/bench/pipeline_schedules if needed
# (the release preset, as bench/run_training_bench.sh).
# Each configuration runs REPEATS times (default 3, in rounds) and the run with the shortest
# step is shown.
#   bench/run_pipeline_bench.sh [STEPS] [REPEATS]     (defaults 5 and 3; HIDDEN, SEQ, BUILD
#                                                      override hidden 256, seq 128, build/release)
# On a 2-core machine P = 4 oversubscribes the cores: those measured bubbles include
# time-sharing; P = 2 is the meaningful measured comparison, the simulation gives the clean
# numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-5}
REPEATS=${2:-3}
HIDDEN=${HIDDEN:-256}
SEQ=${SEQ:-128}
BUILD=${BUILD:-build/release}
BIN=$BUILD/bench/pipeline_schedules
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake --preset release >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target pipeline_schedules >/dev/null  # a no-op when up to date
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CORES=$(nproc)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores; $(date -u +%F)"
echo "model: 8 layers, hidden $HIDDEN, seq $SEQ, 8 micro-batches of 1 sample per step, 1 thread per rank, $STEPS timed steps; best of $REPEATS runs"
if (( CORES < 4 )); then
  echo "NOTE: P = 4 runs 4 ranks on $CORES cores (oversubscribed): their measured busy/idle times include"
  echo "      waiting for a core. P = 2 is the meaningful measured comparison; the simulation gives the clean numbers."
fi
# Every configuration runs REPEATS times, in rounds over all of them, and the run with the
# shortest step is kept: the VM is shared, and a neighbour's burst (often tens of seconds)
# slows whole runs down, so back-to-back repeats would all land in it.
CONFIGS=("1 --schedule none")
for P in 2 4; do
  CONFIGS+=("$P --schedule 1f1b" "$P --schedule interleaved --vpp 2" "$P --schedule dualpipev"
            "$P --schedule dualpipev-dw-detach")
done
BEST_OUT=()
BEST_MS=()
for ((round = 0; round < REPEATS; ++round)); do
  for i in "${!CONFIGS[@]}"; do
    read -r np args <<<"${CONFIGS[$i]}"
    # $args unquoted: it holds several words
    out=$(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
      -np "$np" "$BIN" --layers 8 --microbatches 8 --hidden "$HIDDEN" --seq "$SEQ" --steps "$STEPS" $args)
    ms=$(echo "$out" | sed -nE 's/^summary: .*: step ([0-9.]+) ms.*/\1/p')
    if [[ -z ${BEST_MS[$i]:-} ]] || awk -v a="$ms" -v b="${BEST_MS[$i]}" 'BEGIN{exit !(a < b)}'; then
      BEST_OUT[$i]=$out
      BEST_MS[$i]=$ms
    fi
  done
done
for out in "${BEST_OUT[@]}"; do
  echo
  echo "$out"
done

echo
echo "| P | schedule | step (ms) | tokens/s | bubble measured (mean / worst rank) | bubble sim | bubble formula | peak in flight measured | peak sim | loss |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${BEST_OUT[@]}" | perl -ne 'print "| $2 | $1 | $3 | $4 | $5 / $6 | $7 | $8 | $9 | $10 | $11 |\n" if
  /^summary: (.*), P (\d+): step ([\d.]+) ms, (\d+) tokens\/s, bubble measured ([\d.]+) \(mean over ranks; max ([\d.]+)\), sim ([\d.]+), formula ([-\d.]+); peak in flight measured (\d+), sim (\d+); loss ([-\d.]+)$/'

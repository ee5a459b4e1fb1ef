#!/usr/bin/env bash
# Profiler overhead: the step time of pretrain_gpt with --profile off, level0, level1 and
# level2 (+ --profile-record-shapes --profile-with-stack), and level1 with host work and
# memory counters (--profile-with-cpu --profile-with-memory). A small LLaMA-style model
# (6 layers, hidden 256, seq 256, 4 micro-batches of 2) on 2 ranks at TP2 trains 12 steps;
# steps 3..10 (log iterations 4..11) are profiled, and their logged times are averaged (the
# "elapsed time per iteration" of Megatron's log line, --log-interval 1). Each
# configuration runs REPEATS times in rounds (default 3) and the best mean is kept, since
# the VM is shared. Builds build/release/apps/pretrain_gpt if needed (the release preset).
#   bench/run_profiler_bench.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
BUILD=${BUILD:-build/release}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake --preset release >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target pretrain_gpt >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=$(mktemp -d /tmp/profbench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
MODEL="--num-layers 6 --hidden-size 256 --ffn-hidden-size 688 --num-attention-heads 8 --group-query-attention
  --num-query-groups 4 --seq-length 256 --max-position-embeddings 256 --normalization RMSNorm --swiglu
  --position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear
  --micro-batch-size 2 --global-batch-size 8 --lr 1e-4 --train-iters 12 --log-interval 1 --eval-iters 0
  --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --use-flash-attn --tensor-model-parallel-size 2"
WINDOW="--profile-step-start 3 --profile-step-end 11"
CONFIGS=(
  "off|"
  "level0|--profile $WINDOW --profile-level level0"
  "level1|--profile $WINDOW --profile-level level1"
  "level1 + cpu + memory|--profile $WINDOW --profile-level level1 --profile-with-cpu --profile-with-memory"
  "level2 + shapes + stack|--profile $WINDOW --profile-level level2 --profile-record-shapes --profile-with-stack"
)
declare -A BEST TRACE
for ((round = 0; round < REPEATS; round++)); do
  for entry in "${CONFIGS[@]}"; do
    name=${entry%%|*}
    flags=${entry#*|}
    rm -rf "$OUT/profile"
    # shellcheck disable=SC2086
    mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE -np 2 \
      "$BUILD/apps/pretrain_gpt" $MODEL $flags --profile-save-path "$OUT/profile" >"$OUT/log" 2>&1
    # Mean logged step time of iterations 4..11 (train steps 3..10).
    mean=$(awk '/ iteration +[0-9]+\// { split($0, a, "iteration"); split(a[2], b, "/"); it = b[1] + 0;
                  if (it >= 4 && it <= 11 && match($0, /elapsed time per iteration \(ms\): [0-9.]+/)) {
                    v = substr($0, RSTART, RLENGTH); sub(/.*: /, "", v); s += v; n++ } }
                END { if (n) printf "%.1f", s / n }' "$OUT/log")
    if [ -z "${BEST[$name]:-}" ] || awk -v a="$mean" -v b="${BEST[$name]}" 'BEGIN { exit !(a < b) }'; then
      BEST[$name]=$mean
    fi
    TRACE[$name]=$( (cat "$OUT"/profile/*.json 2>/dev/null || true) | wc -c)
  done
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(date -u +%F)"
echo "model: 6 layers, hidden 256, seq 256, TP2 on 2 ranks, 4 micro-batches of 2 per step; steps 3..10 profiled; best of $REPEATS"
echo
echo "| profiling | mean step (ms), profiled steps | vs off | trace bytes (2 ranks) |"
echo "|---|---|---|---|"
for entry in "${CONFIGS[@]}"; do
  name=${entry%%|*}
  echo "| $name | ${BEST[$name]} | $(awk -v a="${BEST[$name]}" -v b="${BEST[off]}" 'BEGIN { printf "%+.1f %%", (a / b - 1) * 100 }') | ${TRACE[$name]:-0} |"
done

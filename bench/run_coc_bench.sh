#!/usr/bin/env bash
# Compute-communication overlap (MindSpeed's --use-ascend-coc, script mode, and --use-ascend-mc2):
# step time of pretrain_gpt at TP2 (2 ranks) and TP4 (4 ranks), with and without sequence
# parallelism, with CoC off and at --coc-parallel-num 2 and 4, and with MC2 (sequence parallel), on a GEMM-heavy model (2 layers, hidden 512, FFN 2048,
# 1024 tokens per micro-batch). For each configuration:
#   * the mean logged step time of iterations 3..6 ("elapsed time per iteration", --log-interval 1),
#     best of REPEATS runs in rounds (default 2; the VM is shared);
#   * from one more run profiled at level1 (steps 2..4), bench/trace_overlap.py's measure of rank 0:
#     the time the tensor-parallel collectives occupied the communication thread per step (what
#     they would cost with no overlap), how much of it ran under GEMM kernels on the main thread,
#     and the rest (exposed).
# Builds $BUILD/apps/pretrain_gpt if needed (BUILD, default build/release; build/ci is the same
# optimisation level).
#   bench/run_coc_bench.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-2}
BUILD=${BUILD:-build/release}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake --preset release >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target pretrain_gpt >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=$(mktemp -d /tmp/cocbench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
MODEL="--num-layers 2 --hidden-size 512 --ffn-hidden-size 2048 --num-attention-heads 8 --seq-length 256
  --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 4 --lr 1e-4 --train-iters 6
  --log-interval 1 --eval-iters 0 --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --use-flash-attn"
PROFILE="--profile --profile-step-start 2 --profile-step-end 4 --profile-level level1"
CONFIGS=()  # TP|SP (yes/no)|CoC chunks (0: off; mc2: --use-ascend-mc2)
for tp in 2 4; do
  for sp in no yes; do
    for chunks in 0 2 4 $([ "$sp" = yes ] && echo mc2); do
      CONFIGS+=("$tp|$sp|$chunks")
    done
  done
done
flags_of() {  # entry -> pretrain_gpt flags
  IFS='|' read -r tp sp chunks <<<"$1"
  echo "--tensor-model-parallel-size $tp $([ "$sp" = yes ] && echo --sequence-parallel)" \
    "$(case $chunks in 0) ;; mc2) echo --use-ascend-mc2 ;; *) echo "--use-ascend-coc --coc-parallel-num $chunks" ;; esac)"
}
run() {  # entry, extra flags, log
  # shellcheck disable=SC2086
  mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
    -np "${1%%|*}" "$BUILD/apps/pretrain_gpt" $MODEL $(flags_of "$1") $2 >"$3" 2>&1
}
declare -A BEST OVERLAP
for ((round = 0; round < REPEATS; round++)); do
  for entry in "${CONFIGS[@]}"; do
    run "$entry" "" "$OUT/log"
    mean=$(awk '/ iteration +[0-9]+\// { split($0, a, "iteration"); split(a[2], b, "/"); it = b[1] + 0;
                  if (it >= 3 && it <= 6 && match($0, /elapsed time per iteration \(ms\): [0-9.]+/)) {
                    v = substr($0, RSTART, RLENGTH); sub(/.*: /, "", v); s += v; n++ } }
                END { if (n) printf "%.1f", s / n }' "$OUT/log")
    [ -n "$mean" ] || { echo "run failed: $(flags_of "$entry")" >&2; tail -5 "$OUT/log" >&2; exit 1; }
    if [ -z "${BEST[$entry]:-}" ] || awk -v a="$mean" -v b="${BEST[$entry]}" 'BEGIN { exit !(a < b) }'; then
      BEST[$entry]=$mean
    fi
  done
done
for entry in "${CONFIGS[@]}"; do
  rm -rf "$OUT/profile"
  run "$entry" "$PROFILE --profile-ranks 0 --profile-save-path $OUT/profile" "$OUT/log"
  OVERLAP[$entry]=$(python3 bench/trace_overlap.py --cells "$OUT"/profile/rank_00000.trace.json)
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(date -u +%F)"
echo "model: 2 layers, hidden 512, FFN 2048, seq 256 x micro-batch 4; one micro-batch per step; best of $REPEATS"
echo
echo "| TP | SP | CoC chunks / MC2 | step (ms) | vs CoC off | TP collectives/step | TP comm (ms/step) | under GEMMs (ms/step) | exposed (ms/step) |"
echo "|---|---|---|---|---|---|---|---|---|"
for entry in "${CONFIGS[@]}"; do
  IFS='|' read -r tp sp chunks <<<"$entry"
  base="$tp|$sp|0"
  echo "| $tp | $sp | $([ "$chunks" = 0 ] && echo off || echo "$chunks") | ${BEST[$entry]} |" \
    "$(awk -v a="${BEST[$entry]}" -v b="${BEST[$base]}" 'BEGIN { printf "%+.1f %%", (a / b - 1) * 100 }') | ${OVERLAP[$entry]} |"
done

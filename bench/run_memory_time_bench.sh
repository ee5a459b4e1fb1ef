#!/usr/bin/env bash
# Memory features: step time against bytes (issue 14). One GPT trained with each memory
# feature alone and with the best combination, on one rank: the median time per step, the
# peak bytes the allocator counted (all categories, set-up included), the activations' and
# the optimizer's peaks, and what the swap tier held. Every feature is lossless except
# --o2-optimizer (bf16 moments); their bitwise equality with the plain run is in the tests
# (RecomputeRunsLogTheBitsOfThePlainRun, OptimizerMemoryFeaturesLogTheBitsOfThePlainRun and
# tests/optimizer, tests/transformer). Model: GPT, h=1024, a=16, L=8, s=1024, b=1, vocab
# 50304 (mock data), bf16, flash attention; 4 steps, the median of steps 2-4; about 8
# minutes on 2 cores. Then the pipeline-schedule recompute (--recompute-in-bubble,
# --recompute-in-advance) at PP2 x VPP2 on 2 ranks beside the schedules they replace.
#   bench/run_memory_time_bench.sh [path/to/pretrain_gpt]   (default build/release/apps/pretrain_gpt)
# Environment: MEMORY_TIME_LAYERS / MEMORY_TIME_HIDDEN / MEMORY_TIME_HEADS change the model.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/memory_bench_common.sh
source bench/memory_bench_common.sh
memory_bench_setup memory-time-bench "${1:-}"

L=${MEMORY_TIME_LAYERS:-8} H=${MEMORY_TIME_HIDDEN:-1024} A=${MEMORY_TIME_HEADS:-16} S=1024
COMMON=(--num-layers "$L" --hidden-size "$H" --num-attention-heads "$A" --seq-length "$S"
        --max-position-embeddings "$S" --micro-batch-size 1 --global-batch-size 1 --lr 1e-4
        --train-iters 4 --log-interval 1 --eval-iters 0 --mock-data --tokenizer-type NullTokenizer
        --vocab-size 50256 --bf16 --use-flash-attn --seed 1234)

FEATURES=(
  "none|"
  "selective recompute (core_attn)|--recompute-activations"
  "full recompute, uniform, 1 layer per unit|--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
  "full recompute, block, 4 of $L layers|--recompute-granularity full --recompute-method block --recompute-num-layers 4"
  "activation-function recompute|--recompute-activation-function"
  "norm recompute|--recompute-norm"
  "swap attention (file tier)|--swap-attention --swap-dir $WORK"
  "distributed optimizer|--use-distributed-optimizer"
  "reuse-fp32-param|--reuse-fp32-param"
  "O2 optimizer (bf16 moments)|--o2-optimizer"
  "reuse-fp32-param + O2|--reuse-fp32-param --o2-optimizer"
  "swap optimizer (16 slices, file tier)|--use-distributed-optimizer --swap-optimizer --swap-dir $WORK"
  "best: full recompute + swap optimizer|--use-distributed-optimizer --swap-optimizer --swap-dir $WORK --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
)

# measure NAME ARGS...: "median_ms total_peak act_peak opt_peak swapped_peak" (MiB) on stdout
measure() {
  local name=$1
  shift
  if ! mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS="$(nproc)" \
      -x OMP_WAIT_POLICY=PASSIVE -np 1 "$BIN" "${COMMON[@]}" "$@" >"$WORK/$name.log" 2>&1; then
    echo "run $name failed:" >&2
    tail -20 "$WORK/$name.log" >&2
    exit 1
  fi
  local ms
  ms=$(grep -o 'elapsed time per iteration (ms): [0-9.]*' "$WORK/$name.log" | awk 'NR >= 2 { print $NF }' |
       sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  memory_line_fields "$WORK/$name.log" 0 |
    awk -v ms="$ms" '{ v[$1] = $2 }
                     END { print ms, v["log_total_peak"] + 0, v["log_activations_peak"] + 0,
                                 v["log_optimizer_peak"] + 0, v["log_swapped_peak"] + 0 }'
}

echo "## Step time against bytes, per memory feature"
echo
echo "GPT h=$H a=$A L=$L s=$S b=1 vocab 50304, bf16, flash attention, one rank on $(nproc) cores;"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'). Median step of steps 2-4;"
echo "peaks in MiB as the allocator counts them (set-up included); swapped = the file tier's peak."
echo
echo "| feature | step (s) | time vs none | peak total (MiB) | saved (MiB) | activations peak | optimizer peak | swapped peak |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
base_ms="" base_peak=""
i=0
for entry in "${FEATURES[@]}"; do
  fname=${entry%%|*} fflags=${entry#*|}
  # shellcheck disable=SC2086
  read -r ms peak act opt sw <<<"$(measure "f$i" $fflags)"
  if [ -z "$base_ms" ]; then base_ms=$ms base_peak=$peak; fi
  awk -v n="$fname" -v ms="$ms" -v bms="$base_ms" -v pk="$peak" -v bpk="$base_peak" -v act="$act" -v opt="$opt" \
      -v sw="$sw" 'BEGIN { printf "| %s | %.2f | %+.1f%% | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                           n, ms / 1000, 100 * (ms / bms - 1), pk, bpk - pk, act, opt, sw }'
  i=$((i + 1))
done

# --- Recompute as a pipeline-schedule unit (ripipe): PP2 x VPP2 on 2 ranks -----------------
PH=512 PA=8 PL=8 M=8
PIPE=(--num-layers "$PL" --hidden-size "$PH" --num-attention-heads "$PA" --seq-length "$S"
      --max-position-embeddings "$S" --micro-batch-size 1 --global-batch-size "$M" --lr 1e-4 --train-iters 4
      --log-interval 1 --eval-iters 0 --mock-data --tokenizer-type NullTokenizer --vocab-size 50256 --bf16
      --use-flash-attn --seed 1234 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2)
RIPIPE=(
  "no recompute|"
  "--recompute-in-bubble|--recompute-in-bubble"
  "full recompute, block, 2 layers per chunk|--recompute-granularity full --recompute-method block --recompute-num-layers 2"
  "same + --recompute-in-advance|--recompute-granularity full --recompute-method block --recompute-num-layers 2 --recompute-in-advance"
)
# measure_pp NAME ARGS...: "median_ms act_peak_rank0 act_peak_rank1"
measure_pp() {
  local name=$1
  shift
  if ! mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 )) \
      -x OMP_WAIT_POLICY=PASSIVE -np 2 "$BIN" "${PIPE[@]}" "$@" >"$WORK/$name.log" 2>&1; then
    echo "run $name failed:" >&2
    tail -20 "$WORK/$name.log" >&2
    exit 1
  fi
  local ms a0 a1
  ms=$(grep -o 'elapsed time per iteration (ms): [0-9.]*' "$WORK/$name.log" | awk 'NR >= 2 { print $NF }' |
       sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  a0=$(memory_line_fields "$WORK/$name.log" 0 | awk '$1 == "log_activations_peak" { print $2 }')
  a1=$(memory_line_fields "$WORK/$name.log" 1 | awk '$1 == "log_activations_peak" { print $2 }')
  echo "$ms ${a0:-0} ${a1:-0}"
}
echo
echo "## Recompute in the pipeline schedule (ripipe)"
echo
echo "GPT h=$PH a=$PA L=$PL s=$S, PP2 x VPP2 (2 layers per chunk), $M micro-batches of 1, bf16, flash attention;"
echo "2 ranks on $(nproc) cores. Median step of steps 2-4; activation peaks per rank in MiB."
echo
echo "| schedule | step (s) | time vs the row above | activations peak rank 0 | rank 1 |"
echo "|---|---:|---:|---:|---:|"
prev=""
i=0
for entry in "${RIPIPE[@]}"; do
  rname=${entry%%|*} rflags=${entry#*|}
  # shellcheck disable=SC2086
  read -r ms a0 a1 <<<"$(measure_pp "pp$i" $rflags)"
  cmp="-"
  if [ -n "$prev" ] && [ $((i % 2)) = 1 ]; then cmp=$(awk -v a="$ms" -v b="$prev" 'BEGIN { printf "%+.1f%%", 100 * (a / b - 1) }'); fi
  awk -v n="$rname" -v ms="$ms" -v c="$cmp" -v a0="$a0" -v a1="$a1" \
      'BEGIN { printf "| %s | %.2f | %s | %.1f | %.1f |\n", n, ms / 1000, c, a0, a1 }'
  prev=$ms
  i=$((i + 1))
done

#!/usr/bin/env bash
# MoE layer benchmark on this machine (bench/moe_layer.cpp under mpirun; EP = number of ranks,
# one thread per rank, the ranks share the machine's cores):
#  1. one MoE layer's forward + backward per micro-batch with each dispatcher (allgather,
#     alltoall; grouped GEMM) at EP = 1, 2, 4, with the dispatcher's and the bare
#     collectives' time and the bytes per step;
#  2. with shared experts, the step time without and with the overlap flags and the share of
#     the overlappable communication they hide, and (moe_layer --exposed) the waits on the
#     in-flight collectives at the overlap points without and with overlap in one process;
#  3. end to end on one process (train_throughput, all cores): mixtral-small beside its dense
#     twin of the same active parameters (and llama-small), tokens/s and MFU against the SGEMM
#     peak measured in the same run.
# Each configuration runs REPEATS times in rounds (the VM is shared); the fastest run is kept.
# Prints Markdown tables. SECTIONS="1 2 3" picks which; extra moe_layer flags (sizes) in ARGS.
#   bench/run_moe_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
BIN="$BUILD/bench/moe_layer"
SECTIONS=${SECTIONS:-1 2 3}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-5}
NPS=${NPS:-2 4}
SHARED=${SHARED:-2816}
read -r -a EXTRA <<<"${ARGS:-}"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run NP ARGS...: one JSON line
  local np=$1
  shift
  mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
    -np "$np" "$BIN" --steps "$STEPS" "${EXTRA[@]}" "$@" </dev/null | grep '^{'
}
field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/"; }
sfield() { sed "s/.*\"$1\": \"\([^\"]*\)\".*/\1/"; }
# best KEY: from the JSON lines on stdin, the one with the smallest step_ms.
best() { awk -F'"step_ms": ' '{split($2, a, ","); if (!n || a[1] + 0 < m) {m = a[1] + 0; l = $0; n = 1}} END {print l}'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $BIN ${EXTRA[*]:-}"
echo
if want 1; then
  echo "### MoE layer forward + backward per micro-batch, each dispatcher (fastest of $REPEATS runs)"
  echo
  echo "| EP (ranks) | dispatcher | step (ms, median) | fwd (ms) | bwd (ms) | tokens/s (all ranks) | max expert rows | dispatcher alone, 4 steps (ms) | bare collectives (ms) | collectives / step | traffic per step and rank (counters) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  declare -A out1
  for round in $(seq "$REPEATS"); do
    for np in 1 $NPS; do
      for d in allgather alltoall; do
        out1[$np,$d]+="$(run "$np" --dispatcher "$d")"$'\n'
      done
    done
  done
  for np in 1 $NPS; do
    for d in allgather alltoall; do
      j=$(printf '%s' "${out1[$np,$d]}" | best)
      s=$(echo "$j" | field step_ms)
      c=$(echo "$j" | field comm_ms)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$np" "$d" "$s" "$(echo "$j" | field fwd_ms)" \
        "$(echo "$j" | field bwd_ms)" \
        "$(awk -v p="$np" -v t="$(echo "$j" | field tokens_per_rank)" -v s="$s" 'BEGIN{printf "%.0f", 1000*p*t/s}')" \
        "$(echo "$j" | field max_expert_rows)" "$(echo "$j" | field dispatcher_ms)" "$c" \
        "$(awk -v c="$c" -v s="$s" 'BEGIN{printf "%.1f%%", 100*c/s}')" "$(echo "$j" | sfield comm)"
    done
  done
  echo
fi
if want 2; then
  EXPOSED=${EXPOSED:-4}
  configs=("alltoall|" "alltoall|--moe-shared-expert-overlap" "alltoall|--moe-alltoall-overlap-comm"
           "allgather|" "allgather|--moe-allgather-overlap-comm")
  declare -A out2
  for np in $NPS; do
    for round in $(seq "$REPEATS"); do
      for c in "${configs[@]}"; do
        d=${c%%|*}
        flags=${c#*|}
        # The comm-overlap runs also replay the layer's order with and without overlap.
        [[ "$flags" == *overlap-comm ]] && flags+=" --exposed $EXPOSED"
        # shellcheck disable=SC2086
        out2[$np,$c]+="$(run "$np" --dispatcher "$d" --shared "$SHARED" $flags)"$'\n'
      done
    done
  done
  echo "### Step time with and without the overlap flags (shared experts $SHARED; separate runs, fastest of $REPEATS in rounds)"
  echo
  echo "| EP | dispatcher | flags | step (ms, median) | saved vs none (ms) | overlappable collectives t_comm (ms) | overlapped compute t_shared (ms) | share hidden = saved / min(t_comm, t_shared) |"
  echo "|---|---|---|---|---|---|---|---|"
  for np in $NPS; do
    for c in "${configs[@]}"; do
      d=${c%%|*}
      flags=${c#*|}
      j=$(printf '%s' "${out2[$np,$c]}" | best)
      base=$(printf '%s' "${out2[$np,$d|]}" | best | field step_ms)
      s=$(echo "$j" | field step_ms)
      coll=$(awk -v a="$(echo "$j" | field coll_dispatch_ms)" -v b="$(echo "$j" | field coll_combine_bwd_ms)" \
        -v c="$(echo "$j" | field coll_dispatch_bwd_ms)" 'BEGIN{printf "%.2f", a+b+c}')
      comp=$(echo "$j" | field overlapped_compute_ms)
      saved="" share=""
      if [[ -n "$flags" ]]; then
        saved=$(awk -v a="$base" -v b="$s" 'BEGIN{printf "%.1f", a-b}')
        share=$(awk -v a="$base" -v b="$s" -v c="$coll" -v k="$comp" 'BEGIN{m = c < k ? c : k; printf "%.0f%%", 100*(a-b)/m}')
      fi
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n" "$np" "$d" "${flags:-none}" "$s" "$saved" "$coll" "$comp" "$share"
    done
  done
  echo
  echo "### Waits on the in-flight collectives at the three overlap points (the layer's order replayed, $EXPOSED pairs of steps alternating without/with overlap in one process)"
  echo
  echo "| EP | dispatcher, flag | wait of the last rank to arrive (critical path): without -> with overlap (ms) | hidden | longest wait (transfer + skew): without -> with (ms) | per point without (min/max) | per point with (min/max) | replayed step: without -> with (ms) |"
  echo "|---|---|---|---|---|---|---|---|"
  for np in $NPS; do
    for c in "alltoall|--moe-alltoall-overlap-comm" "allgather|--moe-allgather-overlap-comm"; do
      j=$(printf '%s' "${out2[$np,$c]}" | best)
      no=$(echo "$j" | field exposed_wait_no_ms)
      ov=$(echo "$j" | field exposed_wait_ov_ms)
      printf "| %s | %s %s | %s -> %s | %s | %s -> %s | %s | %s | %s -> %s |\n" "$np" "${c%%|*}" "${c#*|}" "$no" "$ov" \
        "$(awk -v a="$no" -v b="$ov" 'BEGIN{if (a > 0.05) printf "%.0f%%", 100*(a-b)/a; else printf "(nothing exposed)"}')" \
        "$(echo "$j" | field exposed_wait_max_no_ms)" "$(echo "$j" | field exposed_wait_max_ov_ms)" \
        "$(echo "$j" | sfield exposed_wait_points_no)" "$(echo "$j" | sfield exposed_wait_points_ov)" \
        "$(echo "$j" | field exposed_step_no_ms)" "$(echo "$j" | field exposed_step_ov_ms)"
    done
  done
  echo
fi
if want 3; then
  THREADS=${THREADS:-$(nproc)}
  PEAK=$(OMP_NUM_THREADS=$THREADS "$BUILD/bench/gemm_peak" | grep '"sgemm_peak"' | tail -1 | field gflops)
  echo "### End to end, one process, $THREADS threads (train_throughput --steps $STEPS --warmup 1; fastest of $REPEATS runs in rounds)"
  echo
  echo "SGEMM peak in this run: $PEAK GFLOP/s."
  echo
  echo "| config | params | active params | step (s) | tokens/s | TFLOP/s | MFU | allocator peak (MiB) | tokens/s vs mixtral-small-dense |"
  echo "|---|---|---|---|---|---|---|---|---|"
  cfgs=(mixtral-small mixtral-small-dense llama-small)
  declare -A out3
  for round in $(seq "$REPEATS"); do
    for cfg in "${cfgs[@]}"; do
      out3[$cfg]+="$(OMP_NUM_THREADS=$THREADS "$BUILD/bench/train_throughput" --config "$cfg" --steps "$STEPS" --warmup 1 \
        --peak-gflops "$PEAK")"$'\n'
    done
  done
  fastest() { awk -F'"step_s": ' '{split($2, a, ","); if (!n || a[1] + 0 < m) {m = a[1] + 0; l = $0; n = 1}} END {print l}'; }
  dense=$(printf '%s' "${out3[mixtral-small-dense]}" | fastest | field tokens_per_s)
  for cfg in "${cfgs[@]}"; do
    j=$(printf '%s' "${out3[$cfg]}" | fastest)
    tps=$(echo "$j" | field tokens_per_s)
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$cfg" "$(echo "$j" | field params)" \
      "$(echo "$j" | field active_params)" "$(echo "$j" | field step_s)" "$tps" "$(echo "$j" | field tflops)" \
      "$(awk -v m="$(echo "$j" | field mfu)" 'BEGIN{printf "%.0f%%", 100*m}')" "$(echo "$j" | field alloc_peak_mib)" \
      "$(awk -v a="$tps" -v b="$dense" 'BEGIN{printf "%.2fx", a/b}')"
  done
  echo
fi

#!/usr/bin/env bash
# Context-parallel benchmark on this machine (bench/context_parallel.cpp under mpirun; the
# ranks share the machine's cores, so tokens/s compares algorithms, not scaling):
#  1. activation memory per rank against the sequence length for C = 1, 2, 4 (ring);
#  2. the longest sequence that trains within an activation budget per rank, with and
#     without context parallelism;
#  3. tokens/s and ring traffic of each algorithm at one length;
#  4. the ring's communication hidden by --use-cp-send-recv-overlap (step time with/without).
# Prints Markdown tables. SECTIONS="1 2 3 4" picks which.
#   bench/run_context_parallel_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
BIN="$BUILD/bench/context_parallel"
BUDGET_MIB=${BUDGET_MIB:-128}
SECTIONS=${SECTIONS:-1 2 3 4}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run NP ARGS...
  local np=$1
  shift
  mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
    -np "$np" "$BIN" "$@" </dev/null | grep '^{'
}
field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/"; }

if want 1; then
echo "### Activation memory per rank (MiB, peak over a step; ring, causal, tiny GPT: 2 layers, h 128)"
echo
echo "| seq | C = 1 | C = 2 | C = 4 | C=1 / C=2 | C=1 / C=4 |"
echo "|---|---|---|---|---|---|"
for seq in 2048 4096 8192 16384; do
  m1=$(run 1 --seq "$seq" --steps 1 | field activation_peak_mib)
  m2=$(run 2 --seq "$seq" --steps 1 --overlap | field activation_peak_mib)
  m4=$(run 4 --seq "$seq" --steps 1 --overlap | field activation_peak_mib)
  awk -v s="$seq" -v a="$m1" -v b="$m2" -v c="$m4" 'BEGIN{printf "| %d | %.1f | %.1f | %.1f | %.2f | %.2f |\n", s, a, b, c, a/b, a/c}'
done
echo
fi
if want 2; then
echo "### Longest sequence within ${BUDGET_MIB} MiB of activations per rank (powers of two)"
echo
echo "| C | longest seq | activation MiB | step (s) |"
echo "|---|---|---|---|"
for np in 1 2 4; do
  best=""
  seq=4096
  while :; do
    out=$(run "$np" --seq "$seq" --steps 1 --overlap)
    mib=$(echo "$out" | field activation_peak_mib)
    if awk -v m="$mib" -v b="$BUDGET_MIB" 'BEGIN{exit !(m > b)}'; then break; fi
    best="$seq|$mib|$(echo "$out" | field step_s)"
    seq=$((seq * 2))
  done
  IFS='|' read -r s m t <<<"$best"
  echo "| $np | $s | $m | $t |"
done
echo
echo
fi
SEQ=${SEQ:-8192}
row() {  # row NAME NP ARGS...: the fastest of 3 runs
  local name=$1 np=$2
  shift 2
  local out best=""
  for _ in 1 2 3; do
    out=$(run "$np" --seq "$SEQ" --steps 2 "$@")
    if [[ -z "$best" ]] || awk -v a="$(echo "$out" | field step_s)" -v b="$(echo "$best" | field step_s)" 'BEGIN{exit !(a < b)}'; then
      best=$out
    fi
  done
  printf "| %s | %s | %s | %s | %s | %s |\n" "$name" "$*" "$(echo "$best" | field step_s)" \
    "$(echo "$best" | field tokens_per_s)" "$(echo "$best" | field activation_peak_mib)" \
    "$(echo "$best" | field ring_send_mib_per_step)"
}
if want 3; then
echo "### Each algorithm at seq $SEQ (fastest of 3 runs; C = 4 puts 4 ranks on this machine's $(nproc) cores)"
echo
echo "| algorithm | flags | step (s) | tokens/s | activation MiB/rank | ring sends MiB/step/rank |"
echo "|---|---|---|---|---|---|"
row "none (C = 1)" 1
row "Ulysses C2" 2 --algo ulysses
row "ring C2" 2 --algo ring --overlap
row "ring C2, general mask" 2 --algo ring --general --overlap
row "Ulysses C4" 4 --algo ulysses
row "ring C4" 4 --algo ring --overlap
row "ring C4, general mask" 4 --algo ring --general --overlap
row "double ring C4, w 2" 4 --algo ring --window 2 --overlap
row "hybrid C4 (2 x 2)" 4 --algo hybrid --ulysses 2 --overlap
echo
fi
if want 4; then
echo "### Ring communication hidden by --use-cp-send-recv-overlap (ring C2, one rank per core, seq $SEQ)"
echo
echo "| algorithm | flags | step (s) | tokens/s | activation MiB/rank | ring sends MiB/step/rank |"
echo "|---|---|---|---|---|---|"
row "ring C2, transfers then attention" 2 --algo ring
row "ring C2, overlapped" 2 --algo ring --overlap
row "ring C2 general, transfers then attention" 2 --algo ring --general
row "ring C2 general, overlapped" 2 --algo ring --general --overlap
fi

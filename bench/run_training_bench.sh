#!/usr/bin/env bash
# End-to-end training benchmark, mindspeed-cpp next to PyTorch on this machine in one run:
# measures the 2-thread SGEMM peak, then for each configuration (tiny, llama-small,
# gpt2-124m) times mindspeed-cpp and PyTorch (Debian's python3-torch) with the same threads,
# fp32 and AdamW, both as shipped and with glibc's malloc tuned so freed activations are not
# returned to the OS (PyTorch otherwise re-faults them every step). Prints a Markdown table.
#   bench/run_training_bench.sh [BUILD_DIR] [STEPS]     (needs /usr/bin/python3 with torch)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
STEPS=${2:-3}
THREADS=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$THREADS
TUNED=(MALLOC_MMAP_THRESHOLD_=17179869184 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824)
PEAK=$("$BUILD/bench/gemm_peak" | grep '"sgemm_peak"' | tail -1 | sed 's/.*"gflops": \([0-9.]*\).*/\1/')
FMA=$("$BUILD/bench/gemm_peak" | grep '"fma_peak"' | tail -1 | sed 's/.*"gflops": \([0-9.]*\).*/\1/')
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $THREADS threads;" \
     "FMA peak $FMA GFLOP/s, OpenBLAS SGEMM peak $PEAK GFLOP/s (MFU is against the SGEMM peak)"
echo
echo "| config | implementation | malloc | step (s) | tokens/s | TFLOP/s | MFU | peak RSS (MiB) | speed-up of mindspeed-cpp |"
echo "|---|---|---|---|---|---|---|---|---|"
field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/"; }
for cfg in tiny llama-small gpt2-124m; do
  ours=$("$BUILD/bench/train_throughput" --config "$cfg" --steps "$STEPS" --warmup 1 --peak-gflops "$PEAK")
  ours_tuned=$(env "${TUNED[@]}" "$BUILD/bench/train_throughput" --config "$cfg" --steps "$STEPS" --warmup 1 --peak-gflops "$PEAK")
  pt=$(/usr/bin/python3 bench/pytorch_train.py --threads "$THREADS" --config "$cfg" --steps "$STEPS" --peak-gflops "$PEAK")
  pt_tuned=$(env "${TUNED[@]}" /usr/bin/python3 bench/pytorch_train.py --threads "$THREADS" --config "$cfg" --steps "$STEPS" --peak-gflops "$PEAK")
  ours_tps=$(echo "$ours" | field tokens_per_s)
  for row in "mindspeed-cpp|as shipped|$ours" "mindspeed-cpp|tuned|$ours_tuned" "PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')|as shipped|$pt" "PyTorch|tuned|$pt_tuned"; do
    impl=${row%%|*}; rest=${row#*|}; malloc=${rest%%|*}; json=${rest#*|}
    tps=$(echo "$json" | field tokens_per_s)
    speedup=$(awk -v a="$ours_tps" -v b="$tps" 'BEGIN{printf "%.2fx", a/b}')
    printf "| %s | %s | %s | %s | %s | %s | %.0f%% | %s | %s |\n" "$cfg" "$impl" "$malloc" \
      "$(echo "$json" | field step_s)" "$tps" "$(echo "$json" | field tflops)" \
      "$(awk -v m="$(echo "$json" | field mfu)" 'BEGIN{print 100*m}')" "$(echo "$json" | field max_rss_mib)" "$speedup"
  done
done

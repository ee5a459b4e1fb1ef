#!/usr/bin/env bash
# The GPU training benchmark of issue 28, side by side in one run: pretrain_gpt --device cuda
# --bf16 and PyTorch (bench/gpu/torch_gpu_bench.py: SDPA, bf16 autocast, fused AdamW, eager and
# torch.compile) on GPT-2 124M (s 1024, b 8) and a LLaMA-style 1.1B (s 2048, b 4, GQA 32/4,
# SwiGLU, RMSNorm), one GPU. MFU of both against the bf16 GEMM rate torch measures first (and
# the datasheet's 989 TFLOP/s); peak device memory of both (ours: the allocator's peak total).
#
#   bench/gpu/run_gpu_bench.sh [PRETRAIN_GPT] [STEPS]     # default build/gpu-check/payload/bin/pretrain_gpt, 10
#
# Prints a markdown table for bench/README.md. Not yet run on a GPU (no session has had one).
set -uo pipefail
cd "$(dirname "$0")/../.."
PT=${1:-build/gpu-check/payload/bin/pretrain_gpt}
STEPS=${2:-10}
TORCH="python3 bench/gpu/torch_gpu_bench.py"
PEAK=$($TORCH --gemm-peak | sed 's/.*: \([0-9.]*\)}/\1/')
echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); bf16 GEMM rate measured" \
     "by torch (8192^3): $PEAK TFLOP/s; datasheet 989"
echo
echo "| model | implementation | tokens/s | TFLOP/s | MFU (measured peak) | MFU (989) | peak memory (GiB) |"
echo "|---|---|---|---|---|---|---|"

declare -A FLAGS
FLAGS[gpt2-124m]="--num-layers 12 --hidden-size 768 --ffn-hidden-size 3072 --num-attention-heads 12 --seq-length 1024
  --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --vocab-size 50303"
FLAGS[llama-1b]="--num-layers 22 --hidden-size 2048 --ffn-hidden-size 5632 --num-attention-heads 32
  --group-query-attention --num-query-groups 4 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4
  --global-batch-size 4 --vocab-size 31999 --swiglu --normalization RMSNorm --position-embedding-type rope
  --untie-embeddings-and-output-weights --disable-bias-linear"

field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/"; }
for cfg in gpt2-124m llama-1b; do
  # Ours: the median of the iteration lines after the first three (NullTokenizer: vocab + EOD).
  log=$(mktemp)
  timeout 300 "$PT" ${FLAGS[$cfg]} --mock-data --tokenizer-type NullTokenizer --use-flash-attn --bf16 --lr 3e-4 \
    --train-iters $((STEPS + 3)) --log-interval 1 --eval-iters 0 --device cuda --peak-tflops "$PEAK" > "$log" 2>&1
  python3 - "$log" "$cfg" "$PEAK" <<'EOF'
import re, statistics, sys
log, cfg, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
lines = [l for l in open(log, errors="replace") if " iteration " in l][3:]
def med(pat):
    vals = [float(m.group(1)) for l in lines for m in [re.search(pat, l)] if m]
    return statistics.median(vals) if vals else float("nan")
tps, tf = med(r"tokens per second per GPU: ([0-9.]+)"), med(r"TFLOP/s/GPU\): ([0-9.]+)")
mem = [float(m.group(1)) for l in open(log, errors="replace") for m in [re.search(r"total [0-9.]+/([0-9.]+) MiB", l)] if m]
print(f"| {cfg} | mindspeed-cpp | {tps:.0f} | {tf:.1f} | {100 * tf / peak:.1f} % | {100 * tf / 989:.1f} % | "
      f"{max(mem) / 1024 if mem else float('nan'):.2f} |" if lines else f"| {cfg} | mindspeed-cpp | failed: see {log} | | | | |")
EOF
  for mode in "" "--compile"; do
    out=$(timeout 600 $TORCH --config "$cfg" $mode --steps "$STEPS" --peak-tflops "$PEAK" 2>/dev/null | tail -1)
    if [ -z "$out" ]; then echo "| $cfg | PyTorch ${mode:-eager} | failed | | | | |"; continue; fi
    printf "| %s | %s | %s | %s | %.1f %% | %.1f %% | %s |\n" "$cfg" "$(echo "$out" | sed 's/.*"impl": "\([^"]*\)".*/\1/')" \
      "$(echo "$out" | field tokens_per_s)" "$(echo "$out" | field tflops)" \
      "$(awk -v m="$(echo "$out" | field mfu)" 'BEGIN{print 100*m}')" \
      "$(awk -v m="$(echo "$out" | field mfu_datasheet)" 'BEGIN{print 100*m}')" "$(echo "$out" | field peak_memory_gib)"
  done
done

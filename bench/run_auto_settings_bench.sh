#!/usr/bin/env bash
# Auto settings (issue 31): the planner's memory and time models against measured runs, and its
# choice against the grid of every legal layout.
#  1. A mixed search with --auto-settings-top-k above the number of layouts: the white box
#     profiles each layer shape (scaled-down runs) and predicts every layout, then every fitting
#     layout runs for --auto-settings-iters iterations (the grid).
#  2. bench/auto_settings_report.py: per layout, the predicted memory per pipeline stage against
#     the run's exact peak and the predicted step against the median iteration; the white box's
#     choice against the grid's best three, re-measured interleaved (medians of ROUNDS); the
#     search's time against the grid's.
# Model: GPT, 4 layers, h=128, a=8, s=256, vocab 4096, bf16, flash attention, global batch 8,
# 4 ranks (oversubscribed on this machine's cores).
#   bench/run_auto_settings_bench.sh [path/to/pretrain_gpt]   (default build/release/apps/pretrain_gpt)
# Environment: RANKS (4), ROUNDS (3), WORK (a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
PRETRAIN=$(realpath "${1:-build/release/apps/pretrain_gpt}")
RANKS=${RANKS:-4}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$(mktemp -d)}
echo "pretrain_gpt: $PRETRAIN; work dir: $WORK; $(nproc) cores; $(date)"
"$PRETRAIN" --auto-settings --nproc-per-node "$RANKS" --auto-settings-type mixed --auto-settings-top-k 1000 \
  --auto-settings-work-dir "$WORK" \
  --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size 128 \
  --num-attention-heads 8 --seq-length 256 --max-position-embeddings 256 --global-batch-size 8 --train-iters 100 \
  --lr 1e-3 --bf16 --use-flash-attn | grep -v "^auto settings: running\|^auto settings: profiling"
/usr/bin/python3 bench/auto_settings_report.py "$WORK/auto_settings_plan.json" --rounds "$ROUNDS" --pretrain "$PRETRAIN"
